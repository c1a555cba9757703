"""The service as the harness drives it: its Flask CLI commands and how to tell whether it
exists."""
import json
import os
import subprocess
import sys

from bench.servers import ROOT

SERVICE_APP = "wsgi:app"
BASELINE_APP = "bench.baseline_app:app"
FLOOR_APP = "bench.floor_app:app"
NAIVE_FLOOR_APP = "bench.naive_floor_app:app"
WRITER_FLOOR_APP = "bench.writer_floor:app"


def available():
    return (ROOT / "wsgi.py").is_file() and (ROOT / "app" / "__init__.py").is_file()


def flask_env(db_path):
    return dict(os.environ, FLASK_DATABASE=str(db_path))


def flask_command(*args):
    return [sys.executable, "-m", "flask", "--app", "app", *args]


def flask(db_path, *args, timeout=120):
    done = subprocess.run(flask_command(*args), cwd=ROOT, env=flask_env(db_path),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        # stderr only: stdout may hold keys.
        raise RuntimeError(f"flask {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def init_db(db_path):
    flask(db_path, "init-db")


def create_merchant(db_path, name="bench", webhook_url=None):
    """A test-mode merchant: {"merchantId", "secretKey", "publicKey", "webhookSecret",
    "livemode"}."""
    args = ["merchants", "create", "--name", name, "--json"]
    if webhook_url:
        args += ["--webhook-url", webhook_url]
    return json.loads(flask(db_path, *args))
