"""Webhook delivery scenario: N due events delivered to a fast local receiver
(bench/receiver_app.py).

Phases, each against the same receiver (its log emptied in between) and checked for exactly-once
delivery (every id received once, N in all):
1. `service-1`: one `flask --app app deliver-webhooks --once` process over N seeded events;
2. `baseline`:  a plain `requests.Session.post` loop (bench/delivery_baseline.py) sending N/2 bodies
                of the size the service sent in phase 1 (a rate needs no more, and the run must
                stay under 5 minutes);
3. `service-2`: two `--once` processes started together over N freshly seeded events;
4. `service-3ep`: one `--once` process over N/3 events of a merchant with 3 endpoints, each
                  subscribed to every event: N deliveries, as in phase 1, fanned out.
Rates are N / wall-clock seconds from process start to the last exit (startup included, as for
cron); the receiver's first-to-last span is recorded too. Peak RSS of each process comes from
wait4().
With `--only baseline` the service phases run the baseline loop instead (phase 3: two loops of N/2).
"""
import os
import shlex
import subprocess
import sys
import time

from bench import bodies, seed, service, stats
from bench.receiver_app import summarize
from bench.servers import ROOT, Gunicorn, machine_busy_seconds, peak_rss_kb

RECEIVER_CONFIG = "bench/receiver_gunicorn.conf.py"
RSS_POLL_SECONDS = 0.05


def run_processes(commands, env, log_path, timeout):
    """Start all commands at once; wait for all.

    Returns wall seconds and, per process, (exit code, peak RSS kB, CPU seconds user + system).
    The peak is the process's own VmHWM, read every RSS_POLL_SECONDS while it runs: wait4()'s
    ru_maxrss also counts this harness's memory at the fork (Linux keeps the larger of the two
    across exec), which after preorder-1m's prefill is more than a delivery process uses.
    """
    with open(log_path, "ab") as log:
        started = time.perf_counter()
        procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
                 for cmd in commands]
    outcomes, pending = {}, {p.pid: p for p in procs}
    peaks = dict.fromkeys(pending, 0)
    deadline, rss_read_at = started + timeout, 0.0
    while pending:
        if time.perf_counter() - rss_read_at >= RSS_POLL_SECONDS:
            rss_read_at = time.perf_counter()
            for pid in pending:
                peaks[pid] = max(peaks[pid], peak_rss_kb(pid) or 0)
        for pid, proc in list(pending.items()):
            waited, status, usage = os.wait4(pid, os.WNOHANG)
            if waited:
                proc.returncode = os.waitstatus_to_exitcode(status)
                # ru_maxrss (kB on Linux) only when the process ended before a VmHWM was read
                outcomes[pid] = (proc.returncode, peaks[pid] or usage.ru_maxrss,
                                 usage.ru_utime + usage.ru_stime)
                del pending[pid]
        if pending and time.perf_counter() > deadline:
            for proc in pending.values():
                proc.kill()
                proc.wait()
            raise RuntimeError(f"{len(pending)} of {len(procs)} processes still running"
                               f" after {timeout}s")
        time.sleep(0.005)
    wall = time.perf_counter() - started
    return wall, [outcomes[p.pid] for p in procs]


def _baseline_commands(url, count, parts, body_bytes):
    share = count // parts
    return [[sys.executable, "-m", "bench.delivery_baseline", "--url", url, "--count",
             str(share if i < parts - 1 else count - share * (parts - 1)),
             "--start", str(i * share), "--body-bytes", str(body_bytes)] for i in range(parts)]


def _service_commands(parts, extra_args):
    return [service.flask_command("deliver-webhooks", "--once", *shlex.split(extra_args))] * parts


def _seeded_db(workdir, name, url, count, endpoints=1):
    """A database with `count` due events of one merchant whose `endpoints` endpoints (`url`, then
    `url`/2, `url`/3...) each get every event."""
    db_path = workdir / f"{name}.sqlite3"
    service.init_db(db_path)
    merchant = service.create_merchant(db_path, webhook_url=url)
    for n in range(2, endpoints + 1):
        service.flask(db_path, "endpoints", "add", merchant["merchantId"], f"{url}/{n}")
    started = time.perf_counter()
    seed.seed_events(db_path, merchant, count)
    return db_path, round(time.perf_counter() - started, 2)


def _phase(name, commands, env, count, receiver, receiver_log, workdir, timeout):
    os.truncate(receiver_log, 0)
    receiver_cpu, busy = receiver.workers_cpu_seconds(), machine_busy_seconds()
    wall, outcomes = run_processes(commands, env, workdir / f"delivery-{name}.log", timeout)
    receiver_cpu = receiver.workers_cpu_seconds() - receiver_cpu
    busy = machine_busy_seconds() - busy
    got = summarize(receiver_log)
    # Share of the machine's CPU used by anything but the deliverers and the receiver.
    foreign = max(0.0, busy - receiver_cpu - sum(o[2] for o in outcomes))
    span = (got["last_at"] - got["first_at"]) if got["received"] > 1 else None
    phase = {"processes": len(commands), "events": count, "seconds": round(wall, 3),
             "per_second": round(count / wall, 1), "receiver": got,
             "receiver_span_per_second": round(got["received"] / span, 1) if span else None,
             "exit_codes": [o[0] for o in outcomes], "peak_rss_kb": [o[1] for o in outcomes],
             "cpu_ms_per_event": round(sum(o[2] for o in outcomes) * 1000 / count, 4),
             "receiver_cpu_ms_per_event": round(receiver_cpu * 1000 / count, 4),
             "foreign_cpu_pct": round(100 * foreign / (wall * os.cpu_count()), 1), "failures": []}
    if any(code != 0 for code in phase["exit_codes"]):
        phase["failures"].append(f"{name}: exit codes {phase['exit_codes']}"
                                 f" (see delivery-{name}.log)")
    if not (got["received"] == got["unique"] == count and got["missing_id"] == 0):
        phase["failures"].append(
            f"{name}: not exactly once: {got['received']} received, {got['unique']} distinct ids, "
            f"{got['duplicated_ids']} duplicated, expected {count}")
    return phase


def run(opts, workdir):
    count, timeout = opts.events, opts.delivery_timeout
    receiver_log = workdir / "receiver-ids.tsv"
    receiver_log.touch()
    result = {"scenario": "delivery", "app": "baseline" if opts.only_baseline else "service",
              "events": count, "phases": {}, "failures": []}
    receiver = Gunicorn("receiver", "bench.receiver_app:app", workdir / "receiver.log",
                        env={"RECEIVER_LOG": str(receiver_log)}, config=RECEIVER_CONFIG)
    with receiver:
        url = receiver.base_url + "/hook"
        phases = result["phases"]
        for name, parts in (("service-1", 1), ("baseline", 1), ("service-2", 2),
                            ("service-3ep", 1)):
            if name == "baseline" or opts.only_baseline:
                size = phases.get("service-1", {}).get("receiver", {}).get("mean_body_bytes")
                size = int(size) if size else len(bodies.event_body())
                events = count // 2 if name == "baseline" else count
                env, commands = os.environ.copy(), _baseline_commands(url, events, parts, size)
            else:
                fanned = name == "service-3ep"
                events = count // 3 * 3 if fanned else count  # deliveries
                db_path, result[f"seed_seconds_{name}"] = _seeded_db(
                    workdir, name, url, events // 3 if fanned else count, 3 if fanned else 1)
                env, commands = (service.flask_env(db_path),
                                 _service_commands(parts, opts.delivery_args))
            phases[name] = _phase(name, commands, env, events, receiver, receiver_log, workdir,
                                  timeout)
            result["failures"] += phases[name]["failures"]
        result["receiver_log_alarms"] = receiver.log_alarms()[:20]
    _judge(result)
    return result


def two_processes_ceiling(phase, one_per_second, cores=None):
    """The highest `2 processes / 1` ratio this machine allows: with every core busy at the CPU per
    event that the deliverers and the receiver used in the two-process phase, the rate is at most
    cores / (deliverers' + receiver's CPU per event). On 2 cores shared with the receiver this is
    the ceiling the 2/1 ratio is judged against: the cheaper one process gets, the lower it is."""
    per_event_ms = phase["cpu_ms_per_event"] + phase["receiver_cpu_ms_per_event"]
    if not per_event_ms or not one_per_second:
        return None
    return round((cores or os.cpu_count()) * 1000 / per_event_ms / one_per_second, 3)


def _judge(result):
    phases = result["phases"]
    one, two, base = (phases[name]["per_second"] for name in ("service-1", "service-2", "baseline"))
    result["ratios"] = {"one_process_vs_baseline": stats.ratio(one, base),
                        "two_processes_vs_one": stats.ratio(two, one),
                        "cpu_per_event_one_process_vs_baseline": stats.ratio(
                            phases["service-1"]["cpu_ms_per_event"],
                            phases["baseline"]["cpu_ms_per_event"]),
                        "two_processes_ceiling": two_processes_ceiling(phases["service-2"], one),
                        "three_endpoints_vs_one": stats.ratio(
                            phases["service-3ep"]["per_second"], one),
                        "cpu_per_delivery_three_endpoints_vs_one": stats.ratio(
                            phases["service-3ep"]["cpu_ms_per_event"],
                            phases["service-1"]["cpu_ms_per_event"])}
    sizes = {name: phase["receiver"]["mean_body_bytes"] for name, phase in phases.items()}
    result["mean_body_bytes"] = sizes
    peak = max(phases["service-1"]["peak_rss_kb"] + phases["service-2"]["peak_rss_kb"])
    ceiling = result["ratios"]["two_processes_ceiling"]
    result["ratios"]["two_processes_vs_ceiling"] = stats.ratio(
        result["ratios"]["two_processes_vs_one"], ceiling)
    result["targets"] = [
        stats.target("deliveries/s 1 process / baseline >= 0.90",
                     result["ratios"]["one_process_vs_baseline"], at_least=0.90),
        stats.target("deliveries/s (2 processes / 1) / ceiling >= 0.90",
                     result["ratios"]["two_processes_vs_ceiling"], at_least=0.90),
        stats.target("deliveries/s with 3 endpoints an event / with 1 >= 0.90",
                     result["ratios"]["three_endpoints_vs_one"], at_least=0.90),
        stats.target("delivery worker peak RSS < 100 MB", stats.mb(peak), below=100),
    ]
    if result["receiver_log_alarms"]:
        result["failures"].append(f"receiver log: {result['receiver_log_alarms'][0]}")
