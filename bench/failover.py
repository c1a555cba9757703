"""Watcher failover on PostgreSQL (docs/storage.md, "Several watchers"): two `watch-payments` loops
on one durable database in front of a real Hardhat node (tests/chain's npm packages), with the
shipped defaults (`--poll-interval` 5, WATCHER_LEASE_SECONDS 15) unless told otherwise.

Each round the active watcher fails right after one of its polls (its lease just renewed: the worst
case), alternately by SIGKILL and by SIGSTOP; a transfer to a pending process and its confirmations
are mined at that moment. Measured from the failure: the standby's "polling it" log line (takeover)
and the process's `payment.completed` in the database, read every 20 ms (credit). Target (API.md,
"Several hosts on one PostgreSQL database"): credit ≤ 2 × poll interval + lease. A new standby is
started for the next round; every process must end with exactly one `payment.completed`.

    python -m bench.failover [--rounds 4] [--poll-interval 5] [--lease 15]

A watcher stopped inside a write transaction is measured by
tests/chain/test_watcher_failover.py (the same bound, with the session timeouts ending it).
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from bench import seed, service
from bench.postgres import database_url
from bench.servers import ROOT
from bench.watcher import Node, _addresses

CONFIRMATIONS = 2


class Watcher:
    """A `watch-payments` loop, its output lines kept with the time each was read."""

    def __init__(self, url, poll, lease):
        env = dict(service.flask_env(url), FLASK_WATCHER_LEASE_SECONDS=str(lease),
                   PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            service.flask_command("watch-payments", "--poll-interval", str(poll)), cwd=ROOT,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def said(self, text, since=0.0):
        return next((at for at, line in list(self.lines) if at >= since and text in line), None)

    def end(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


def _wait(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {timeout} s")
        time.sleep(0.02)


def run(rounds, poll, lease):
    workdir = Path(tempfile.mkdtemp(prefix="failover-"))
    node = Node(workdir / "hardhat.log")
    url = database_url()
    watchers = []
    results = []
    try:
        service.init_db(url)
        merchant = service.create_merchant(url)
        addresses = _addresses(rounds, 7)
        process_ids = seed.seed_payments(url, merchant["merchantId"], node.url, node.token,
                                         node.head() + 1, addresses, CONFIRMATIONS)
        db = psycopg.connect(url, autocommit=True)

        def polled_at():
            return db.execute("SELECT polled_at FROM networks WHERE id = 'bench'").fetchone()[0]

        def completed(process_id):
            return db.execute("SELECT count(*) FROM events WHERE process_id = %s AND type ="
                              " 'payment.completed'", (process_id,)).fetchone()[0]

        active = Watcher(url, poll, lease)
        watchers.append(active)
        _wait(lambda: active.said("watch bench: polling it"), "first watcher polling", 60)
        for i in range(rounds):
            standby = Watcher(url, poll, lease)
            watchers.append(standby)
            _wait(lambda s=standby: s.said("watch bench: not needed"), "standby", 60)
            before = polled_at()
            _wait(lambda b=before: polled_at() != b, "a poll of the active watcher", 2 * poll + 5)
            how = "SIGKILL" if i % 2 == 0 else "SIGSTOP"
            os.kill(active.proc.pid, signal.SIGKILL if how == "SIGKILL" else signal.SIGSTOP)
            failed = time.monotonic()
            node.transfer(addresses[i], 10**6)
            node.mine(CONFIRMATIONS)
            took = _wait(lambda s=standby: s.said("watch bench: polling it"), "takeover",
                         2 * poll + lease + 30)
            _wait(lambda p=process_ids[i]: completed(p), "payment.completed", 2 * poll + lease + 30)
            credited = time.monotonic()
            results.append((how, took - failed, credited - failed))
            print(f"round {i + 1}: {how}: takeover {took - failed:.2f} s, credited"
                  f" {credited - failed:.2f} s", flush=True)
            active.end()
            active = standby
        twice = [pid for pid in process_ids if completed(pid) != 1]
        db.close()
    finally:
        for watcher in watchers:
            watcher.end()
        node.close()
    bound = 2 * poll + lease
    credits = [r[2] for r in results]
    print(f"poll interval {poll} s, lease {lease} s: bound {bound:.1f} s; takeover median"
          f" {statistics.median(r[1] for r in results):.2f} s, max {max(r[1] for r in results):.2f}"
          f" s; credited median {statistics.median(credits):.2f} s, max {max(credits):.2f} s")
    if twice:
        print(f"FAILED: not exactly one payment.completed for {twice}")
    if max(credits) > bound:
        print("FAILED: a transfer credited later than the bound")
    return 0 if not twice and max(credits) <= bound else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--lease", type=int, default=15)
    opts = parser.parse_args()
    sys.exit(run(opts.rounds, opts.poll_interval, opts.lease))


if __name__ == "__main__":
    main()
