"""Run wrk with bench/preorder.lua and parse the BENCH_RESULT line its done() prints."""
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

LUA = Path(__file__).resolve().parent / "preorder.lua"
PREORDER_PATH = "/payment-button/process/preorder"
INSTALL_HINT = "wrk is not installed: apt-get install wrk"


def require_wrk():
    if shutil.which("wrk") is None:
        raise SystemExit(INSTALL_HINT)


def parse(stdout):
    for line in stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            raw = json.loads(line[len("BENCH_RESULT "):])
            break
    else:
        raise RuntimeError(f"wrk printed no BENCH_RESULT line:\n{stdout}")
    seconds = raw["duration_us"] / 1e6
    latency = raw["latency_us"]
    return {
        "requests": raw["requests"],
        "seconds": round(seconds, 3),
        "rps": round(raw["requests"] / seconds, 1) if seconds else 0.0,
        "p50_ms": latency["p50"] / 1000,
        "p90_ms": latency["p90"] / 1000,
        "p99_ms": latency["p99"] / 1000,
        "max_ms": latency["max"] / 1000,
        "non2xx": raw["non2xx"],
        "statuses": raw["statuses"],
        "socket_errors": raw["errors"],
    }


def run(base_url, *, body_file, secret_key, duration, connections=16, threads=2):
    """One wrk run against `base_url` + the preorder path; returns parsed figures."""
    cmd = ["wrk", "--latency", f"-c{connections}", f"-t{threads}", f"-d{duration}s",
           "--timeout", "5s", "-s", str(LUA), base_url + PREORDER_PATH]
    env = dict(os.environ, BENCH_BODY_FILE=str(body_file), BENCH_SECRET_KEY=secret_key)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=duration + 60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    figures = parse(done.stdout)
    figures["wrk_cpu_seconds"] = round(after.ru_utime + after.ru_stime
                                       - before.ru_utime - before.ru_stime, 3)
    return figures
