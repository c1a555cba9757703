"""Real server processes for tests: the service under gunicorn, and the flask CLI, in
subprocesses."""
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(database, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "GUNICORN_"))}
    env["FLASK_DATABASE"] = str(database)
    env["PYTHONUNBUFFERED"] = "1"  # whole log lines from every process
    env.update({k: str(v) for k, v in extra.items()})
    return env


def flask(env, *args, check=True, input=None):
    """Run `flask --app app ARGS` as an operator would (`input`: its standard input); returns the
    completed process."""
    return subprocess.run(
        [str(BIN / "flask"), "--app", "app", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=check, input=input,
    )


def create_merchant(env, *args):
    return json.loads(flask(env, "merchants", "create", "--name", "Shop", "--json", *args).stdout)


def wait_for(url, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or workers still booting
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


@contextlib.contextmanager
def gunicorn(env, log_path, workers=4, unprivileged=False, started=None, ready="/healthz"):
    """The service under gunicorn with gunicorn.conf.py; yields its base URL. `unprivileged`: when
    the tests run as root, run it without the capabilities that let root ignore file permissions
    (util-linux's setpriv drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER from the
    bounding set), so a file's mode bits bind it as they bind a service user. `started`: a list that
    receives the gunicorn master's Popen. `ready`: the path that answers 200 once the workers
    serve."""
    port = free_port()
    env = dict(env, GUNICORN_BIND=f"127.0.0.1:{port}", GUNICORN_WORKERS=str(workers))
    prefix = []
    if unprivileged and os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [*prefix, str(BIN / "gunicorn"), "-c", "gunicorn.conf.py"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        if started is not None:
            started.append(proc)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base + ready)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@contextlib.contextmanager
def flask_run(env, log_path):
    """The service under `flask run` (werkzeug's threaded server, as `make run` starts it); yields
    its base URL."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "run", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base + "/healthz")
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def read_answer(sock):
    """Everything the server sends on `sock` until it closes the connection, as (status line,
    {lowercase header name: value}, body); a chunked body is decoded."""
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return status_line, headers, body


def _dechunk(payload):
    out = b""
    while True:
        size, _, rest = payload.partition(b"\r\n")
        size = int(size.split(b";")[0], 16)
        if size == 0:
            return out
        out, payload = out + rest[:size], rest[size + 2:]
