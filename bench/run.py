"""Run the benchmarks: `python -m bench.run [--quick] [--only baseline] [--scenarios a,b]`
(or bench/run.py).

Writes bench/results/<UTC timestamp>.json, prints a short table, exits 1 if any request was not 2xx,
any event was not delivered exactly once, a server logged a traceback, a scenario errored or was
skipped (a seam in bench/seed.py not yet implemented), or, with --check-targets, a target was
missed. See bench/README.md.
"""
import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/run.py`: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import collect, delivery, preorder, report, service, watcher, wrk

# The storage floors are in the default run: the service's throughput targets are set against them.
ALL = ("preorder", "preorder-floor", "preorder-9kb", "preorder-9kb-floor", "preorder-1m",
       "delivery", "watcher")
# run only when named; the pg-* ones need Debian's postgresql (docs/storage.md)
OPTIONAL = ("preorder-naive", "preorder-sync", "preorder-writer", "pg-preorder", "pg-sqlite",
            "pg-preorder-1m", "collect")
# watcher: its floor is in the scenario; preorder-1m needs the service's database
BASELINE_ONLY = ("preorder", "preorder-9kb", "delivery")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["baseline"], help="run the baseline app on both sides "
                        "(the service is not needed): the ratios show the harness's own noise")
    parser.add_argument("--scenarios", help=f"comma-separated subset of {','.join(ALL + OPTIONAL)}")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 round of 2 s, 1 s warm-up, 2,000 events,"
                             " 20,000 processes")
    parser.add_argument("--duration", type=int, help="seconds per wrk round (default 10)")
    parser.add_argument("--rounds", type=int, help="rounds per side, alternating (default: 3 for "
                        "preorder, 2 for preorder-9kb and preorder-1m)")
    parser.add_argument("--warmup", type=int,
                        help="seconds of unrecorded wrk per side first (default 1)")
    parser.add_argument("--events", type=int,
                        help="due events for the delivery scenario (default 20000)")
    parser.add_argument("--processes", type=int,
                        help="processes prefilled for preorder-1m (default 1000000)")
    parser.add_argument("--delivery-args", default="",
                        help="extra arguments for deliver-webhooks --once")
    parser.add_argument("--delivery-timeout", type=int, default=120,
                        help="seconds before a phase is killed")
    parser.add_argument("--watch-blocks", type=int,
                        help="blocks the watcher catches up over (default 10000)")
    parser.add_argument("--watch-transfers", type=int,
                        help="transfers in them, one per address (default 1000)")
    parser.add_argument("--watch-rounds", type=int, help="catch-up rounds per side (default 2)")
    parser.add_argument("--watch-latency-ms", type=int, default=50,
                        help="the catch-up again with both sides behind a proxy adding this to"
                             " every round trip (default 50; 0: not run)")
    parser.add_argument("--watch-watched", type=int,
                        help="pending deposit addresses watched in the catch-up"
                             " (default: --watch-transfers)")
    parser.add_argument("--watch-idle", type=int, default=1000,
                        help="idle watched addresses beside the steady-state ones (default 1000)")
    parser.add_argument("--watch-max-addresses", type=int, default=500,
                        help="the watcher's --max-addresses (default 500)")
    parser.add_argument("--watch-backend", choices=["sqlite", "postgresql"], default="sqlite",
                        help="the catch-up's database (default sqlite)")
    parser.add_argument("--watch-samples", type=int,
                        help="steady-state transfers timed (default 30; 0: no steady state)")
    parser.add_argument("--watch-poll-interval", type=float, default=1.0,
                        help="the steady-state watcher's --poll-interval (default 1 s)")
    parser.add_argument("--check-targets", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--keep-workdir", action="store_true", help="keep databases and logs")
    opts = parser.parse_args(argv)
    quick = opts.quick
    for name, normal, smoke in (("duration", 10, 2), ("rounds", None, 1), ("warmup", 1, 1),
                                ("events", 20000, 2000), ("processes", 1_000_000, 20_000),
                                ("watch_blocks", 10_000, 1_000), ("watch_transfers", 1000, 100),
                                ("watch_rounds", 2, 1), ("watch_samples", 30, 5)):
        if getattr(opts, name) is None:
            setattr(opts, name, smoke if quick else normal)
    opts.only_baseline = opts.only == "baseline"
    default = BASELINE_ONLY if opts.only_baseline else ALL
    opts.scenarios = opts.scenarios.split(",") if opts.scenarios else list(default)
    unknown = set(opts.scenarios) - set(ALL + OPTIONAL)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    needs_db = ("preorder-1m", "preorder-floor", "preorder-9kb-floor", *OPTIONAL)
    if opts.only_baseline and set(needs_db) & set(opts.scenarios):
        parser.error(f"{', '.join(needs_db)} need the service's database:"
                     " they have no baseline-only form")
    # a target against the storage floor needs the floor measured in this run
    if opts.check_targets:
        for name, (floor, _) in preorder.FLOOR_TARGETS.items():
            if name in opts.scenarios and floor not in opts.scenarios:
                opts.scenarios.insert(opts.scenarios.index(name) + 1, floor)
    return opts


def run_scenario(name, opts, workdir):
    try:
        if name == "delivery":
            return delivery.run(opts, workdir)
        if name == "watcher":
            return watcher.run(opts, workdir)
        if name == "collect":
            return collect.run(opts, workdir)
        return preorder.run(name, opts, workdir)
    except NotImplementedError as seam:
        return {"scenario": name, "skipped": str(seam), "failures": []}
    except Exception as error:  # one broken scenario must not hide the others' figures
        traceback.print_exc()
        return {"scenario": name, "error": f"{type(error).__name__}: {error}", "failures": []}


def failed(result, check_targets):
    return bool(result["failures"] or result.get("error") or result.get("skipped") or (
        check_targets and any(t["met"] is False for t in result.get("targets", []))))


def main(argv=None):
    opts = parse_args(argv)
    if set(opts.scenarios) - {"watcher", "delivery", "collect"}:
        wrk.require_wrk()
    if not opts.only_baseline and not service.available():
        sys.exit("the service (wsgi.py, app/) is not in this checkout: use --only baseline")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    started, load_before = time.monotonic(), os.getloadavg()
    results = []
    for name in opts.scenarios:
        print(f"== {name}", flush=True)
        results.append(run_scenario(name, opts, workdir))
    preorder.floor_targets(results)
    summary = {"timestamp": stamp, "machine": report.machine(),
               "settings": {key: getattr(opts, key) for key in (
                   "only", "scenarios", "duration", "rounds", "warmup", "events", "processes",
                   "delivery_args", "watch_blocks", "watch_transfers", "watch_rounds",
                   "watch_samples", "watch_poll_interval", "watch_watched", "watch_idle",
                   "watch_max_addresses", "watch_backend", "watch_latency_ms")},
               "scenarios": results,
               "seconds": round(time.monotonic() - started, 1),
               # Other work on the machine is what makes figures drift: keep it on record.
               "load_average": {"before": load_before, "after": os.getloadavg()}}
    bad = [r["scenario"] for r in results if failed(r, opts.check_targets)]
    summary["failed"] = bad
    path = report.write(summary, stamp)
    print(report.table(summary))
    print(f"results: {path.relative_to(report.ROOT)}")
    if bad or opts.keep_workdir:
        print(f"work directory (databases, server logs) kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if bad:
        print(f"FAILED: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
