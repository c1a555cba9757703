"""Start, probe and stop gunicorn servers on free loopback ports; read their workers' peak RSS."""
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
# Lines in a server log that make a run invalid even when every response was 2xx (a worker killed or
# restarted mid-run, an exception, a lock timeout). "Worker exiting" is not one: it ends every
# stop().
LOG_ALARMS = ("Traceback", "database is locked", "[ERROR]", "[CRITICAL]", "WORKER TIMEOUT",
              "was sent SIGKILL", "Worker failed to boot")


def free_port():
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def children(pid):
    """Pids whose parent is `pid` (gunicorn's workers are the master's direct children)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def peak_rss_kb(pid):
    """VmHWM (peak resident set size) of a live process, in kB; None if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """User + system CPU time a live process has used so far (0.0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def machine_busy_seconds():
    """CPU seconds all cores have spent not idle since boot (from /proc/stat), summed over cores."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user..steal; guest is inside user


class Gunicorn:
    """One gunicorn master started as `python -m gunicorn -c <config>` from the repository root.

    The app and the bind address go through GUNICORN_APP / GUNICORN_BIND, as gunicorn.conf.py reads
    them; `env` adds anything else (FLASK_DATABASE, GUNICORN_* overrides). Output goes to
    `log_path`.
    """

    def __init__(self, name, app, log_path, env=None, config="gunicorn.conf.py"):
        self.name, self.app, self.log_path, self.config = name, app, Path(log_path), config
        self.port = free_port()
        self.env = dict(os.environ, **(env or {}), GUNICORN_APP=app,
                        GUNICORN_BIND=f"{HOST}:{self.port}")
        self.proc = None
        self.companions = []  # processes serving this server's workers (their CPU counts as theirs)

    @property
    def base_url(self):
        return f"http://{HOST}:{self.port}"

    def start(self, ready_timeout=30):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", self.config, self.app], cwd=ROOT, env=self.env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self._wait_ready(ready_timeout)
        return self

    def _wait_ready(self, timeout):
        """Ready when a worker answers HTTP (any status): the socket alone is bound before workers
        boot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: gunicorn exited with {self.proc.returncode}\n"
                                   f"{self.log_tail()}")
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                conn.request("GET", "/__bench_ready")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name}: not ready after {timeout}s\n{self.log_tail()}")

    def workers(self):
        return children(self.proc.pid) if self.proc else []

    def workers_peak_rss_kb(self):
        """Peak RSS of each live worker, in kB (read before stop(): the figures die with the
        workers)."""
        return sorted(rss for rss in map(peak_rss_kb, self.workers()) if rss is not None)

    def workers_cpu_seconds(self):
        return sum(map(cpu_seconds, self.workers() + [c.proc.pid for c in self.companions]))

    def stop(self, timeout=15):
        _terminate(self.proc, timeout)
        for companion in self.companions:  # after the workers that use them
            companion.stop(timeout)

    def log_alarms(self):
        """Log lines that signal a failure (tracebacks, locked database, killed workers), the
        companions' included."""
        return _alarms(self.log_path) + [line for c in self.companions
                                         for line in _alarms(c.log_path)]

    def log_tail(self, n=30):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _terminate(proc, timeout):
    """SIGTERM, then SIGKILL to the process group after `timeout` seconds (started in a session)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _alarms(log_path):
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if any(alarm in line for alarm in LOG_ALARMS)]


class Companion:
    """A process started beside a server for its workers (bench/writer_floor.py's writer), ready
    once `ready_path` exists; stopped with SIGTERM."""

    def __init__(self, name, command, log_path, env, ready_path):
        self.name, self.command, self.log_path = name, command, Path(log_path)
        self.env, self.ready_path, self.proc = env, Path(ready_path), None

    def start(self, ready_timeout=30):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + ready_timeout
        while not self.ready_path.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name}: not ready (exit {self.proc.returncode})\n"
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        return self

    def stop(self, timeout=15):
        _terminate(self.proc, timeout)
