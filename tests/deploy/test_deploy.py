"""deploy/: the systemd units and the env file agree with each other and with the service's
settings; `systemd-analyze verify` accepts the units where it is installed; the cron line for the
delivery worker runs as written (working directory, settings, lock, log) and delivers a webhook."""
import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import Api, unavailable

from app.config import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
VENV = Path(sys.executable).parent.parent
UNITS = {"web": "preorder-web.service", "worker": "preorder-worker.service",
         "watcher": "preorder-watcher.service"}


def parse_unit(path):
    """{section: {key: [values]}}: systemd's syntax (keys may repeat; # and ; comment lines)."""
    sections, current = {}, None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            assert line.endswith("]"), f"{path.name}:{number}: {line}"
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert (sep and current is not None
                and re.fullmatch(r"[A-Za-z]+", key)), f"{path.name}:{number}: {line}"
        current.setdefault(key, []).append(value)
    return sections


def parse_env(path):
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert (sep and re.fullmatch(r"[A-Z_]+", key)
                    and re.fullmatch(r"[^\s'\"$`\\]+", value)), line
            values[key] = value
    return values


def seconds(value):
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match, value
    return int(match[1]) * (60 if match[2] == "min" else 1)


def test_units_stop_gracefully_restart_and_agree_with_the_settings():
    env = parse_env(DEPLOY / "preorder.env")
    data_dir = os.path.dirname(env["FLASK_DATABASE"])
    units = {name: parse_unit(DEPLOY / file) for name, file in UNITS.items()}
    for name, unit in units.items():
        service = unit["Service"]
        one = {key: values[-1] for key, values in service.items()}
        assert one["User"] == one["Group"] == "preorder", name
        assert one["WorkingDirectory"] == "/srv/preorder/app", name
        assert one["EnvironmentFile"] == "/etc/preorder/preorder.env", name
        assert one["KillSignal"] == "SIGTERM" and one["Restart"] == "on-failure", name
        assert one["NoNewPrivileges"] == "yes" and one["ProtectSystem"] == "strict", name
        # The database's directory is the one place it may write, and systemd creates it.
        assert service["ReadWritePaths"] == [data_dir] and one["StateDirectory"] == "preorder", name
        assert unit["Install"]["WantedBy"] == ["multi-user.target"], name
    web, worker, watcher = (units[n]["Service"] for n in ("web", "worker", "watcher"))
    assert web["ExecStart"] == ["/srv/preorder/venv/bin/gunicorn -c gunicorn.conf.py"]
    assert web["Type"] == ["notify"] and web["KillMode"] == ["mixed"]
    assert worker["ExecStart"] == ["/srv/preorder/venv/bin/flask --app app deliver-webhooks"]
    assert watcher["ExecStart"] == ["/srv/preorder/venv/bin/flask --app app watch-payments"]
    # Stop timeouts: gunicorn's graceful_timeout (30 s) and the webhook timeout, with a margin.
    assert seconds(web["TimeoutStopSec"][0]) >= 30 + 10
    for service in (worker, watcher):
        assert seconds(service["TimeoutStopSec"][0]) >= DEFAULTS["WEBHOOK_TIMEOUT_SECONDS"] + 10
    # nginx's upstream is where gunicorn listens.
    assert env["GUNICORN_BIND"] == "127.0.0.1:8000"
    assert "server 127.0.0.1:8000;" in (DEPLOY / "nginx.conf").read_text()


def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    """The units with the checkout and venv of this run in place of /srv/preorder, as verify checks
    the executables (systemd-analyze: Debian's systemd, which .ci/run installs when missing)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed (Debian's systemd package)")
    for file in UNITS.values():
        text = (DEPLOY / file).read_text()
        text = text.replace("/srv/preorder/venv", str(VENV)).replace("/srv/preorder/app", str(ROOT))
        (tmp_path / file).write_text(text)
    result = subprocess.run([analyze, "verify", "--man=no",
                             *(str(tmp_path / f) for f in UNITS.values())],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def cron_lines():
    entries = {}
    for line in (DEPLOY / "preorder.cron").read_text().splitlines():
        if not line or line.startswith("#") or re.fullmatch(r"[A-Z]+=.*", line):
            continue
        fields = line.split(None, 6)
        assert len(fields) == 7 and fields[5] == "preorder", line
        entries[fields[6]] = fields[:5]
    return entries


# the shipped files' layout: the SQLite file and the cron lock in /var/lib/preorder
@pytest.mark.sqlite_only
def test_the_cron_line_delivers_webhooks_as_written(tmp_path, app, client, make_merchant,
                                                    receiver):
    [deliver] = [command for command in cron_lines() if "deliver-webhooks --once" in command]
    assert cron_lines()[deliver] == ["*"] * 5
    # One event to deliver: a cancelled process of a merchant whose webhooks go to the receiver.
    merchant = make_merchant(webhook_url=receiver.url("/hook"))
    api = Api(client, merchant["secretKey"])
    process_id = api.preorder().get_json()["processId"]
    assert api.cancel(process_id).status_code == 200
    # The settings file as shipped but for this test's database; this checkout and venv.
    lib = Path(app.config["DATABASE"]).parent
    env_file = tmp_path / "preorder.env"
    shipped = (DEPLOY / "preorder.env").read_text()
    assert "\nFLASK_WEBHOOK_ALLOW_LOOPBACK=0\n" in shipped  # production: no loopback webhooks
    # This test's receiver is on loopback, where a production merchant's endpoint never is.
    env_file.write_text(shipped
                        .replace("/var/lib/preorder/preorder.sqlite3", app.config["DATABASE"])
                        .replace("FLASK_WEBHOOK_ALLOW_LOOPBACK=0",
                                 "FLASK_WEBHOOK_ALLOW_LOOPBACK=1"))
    (tmp_path / "log").mkdir()
    command = (deliver.replace("/srv/preorder/venv", str(VENV))
               .replace("/srv/preorder/app", str(ROOT))
               .replace("/etc/preorder/preorder.env", str(env_file))
               .replace("/var/lib/preorder", str(lib))
               .replace("/var/log/preorder", str(tmp_path / "log")))
    # cron runs the line with /bin/sh, a bare environment, from the user's home directory.
    cron_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/sh",
                "LOGNAME": "preorder"}
    result = subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, env=cron_env,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [request] = receiver.wait_for(1)
    assert request.path == "/hook" and process_id in request.body.decode()
    log = (tmp_path / "log" / "deliver-webhooks.log").read_text()
    assert re.search(rf"process.cancelled to we_[0-9a-f]{{24}} -> 127.0.0.1:{receiver.port}:"
                     r" 200 in \d+ ms \(delivered\)", log), log
    assert (lib / "deliver-webhooks.cron.lock").exists()
    # While another run holds the lock, a run is skipped (flock -n): exit 1, nothing sent.
    with open(lib / "deliver-webhooks.cron.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        skipped = subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, env=cron_env,
                                 capture_output=True, text=True, timeout=60)
    assert skipped.returncode == 1 and len(receiver.requests) == 1


def test_the_backup_cron_line_is_complete():
    [backup] = [command for command in cron_lines() if "backup-db" in command]
    assert cron_lines()[backup] == ["17", "3", "*", "*", "*"]
    assert backup.startswith("cd /srv/preorder/app && set -a && . /etc/preorder/preorder.env"
                             " && set +a && ")
    # cron turns a bare % into a newline: every one in the command is escaped.
    assert re.search(r"(?<!\\)%", backup) is None
    assert ">> /var/log/preorder/backup.log 2>&1" in backup
