"""The results file (bench/results/<UTC timestamp>.json) and the short table printed on stdout."""
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from bench.servers import ROOT
from bench.stats import mb

RESULTS_DIR = ROOT / "bench" / "results"


def _command_output(*cmd):
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        return None


def machine():
    cpu = next((line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release(), "gunicorn": metadata.version("gunicorn"),
            "flask": metadata.version("flask"),
            "wrk": " ".join((_command_output("wrk", "-v") or "").split()[1:2]),
            "git_commit": _command_output("git", "rev-parse", "--short", "HEAD")}


def write(report, stamp):
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def _fmt(value, spec="{:.2f}"):
    return "-" if value is None else spec.format(value)


def _target_lines(targets):
    marks = {True: "ok", False: "MISSED", None: "n/a"}
    return [f"    target {t['name']}: {_fmt(t['value'])} {marks[t['met']]}" for t in targets]


def _preorder_table(result):
    lines = [f"{result['scenario']} ({result['app']}, body {result['body_bytes']} B, "
             f"{len(result['rounds'][result['reference']])} rounds, medians)",
             f"    {'side':<14}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'CPU ms/req':>12}"
             f"{'peak RSS MB':>13}"]
    for side in (result["reference"], result["subject"]):
        m = result["median"][side]
        peak = max(result["peak_rss_kb"][side] or [0]) or None
        lines.append(f"    {side:<14}{_fmt(m['rps'], '{:.0f}'):>10}{_fmt(m['p50_ms']):>9}"
                     f"{_fmt(m['p99_ms']):>9}{_fmt(m['cpu_ms_per_request'], '{:.3f}'):>12}"
                     f"{_fmt(mb(peak), '{:.1f}'):>13}")
    r = result["ratios"]
    lines.append(f"    ratio {result['subject']}/{result['reference']}: "
                 f"req/s {_fmt(r['rps'], '{:.3f}')}, "
                 f"p50 {_fmt(r['p50'], '{:.3f}')}, p99 {_fmt(r['p99'], '{:.3f}')}, "
                 f"CPU per request {_fmt(r['cpu_per_request'], '{:.3f}')}")
    lines.append(f"    other work's share of the CPU during rounds: "
                 f"max {result['max_foreign_cpu_pct']:.0f} % "
                 f"(above ~10 %, distrust the req/s ratio)")
    lines.append(f"    req/s ratio over the {result['quiet_pairs']} quiet round pairs "
                 f"(other work < 10 %): "
                 f"{_fmt(r['rps_quiet_pairs'], '{:.3f}')}")
    return lines + _target_lines(result["targets"])


def _delivery_table(result):
    lines = [f"delivery ({result['app']}, {result['events']} events)",
             f"    {'phase':<12}{'procs':>6}{'seconds':>9}{'per s':>9}{'recv/s':>9}{'body B':>8}"
             f"{'CPU ms/ev':>11}{'recv CPU':>10}{'peak RSS MB':>13}  exactly once"]
    for name, p in result["phases"].items():
        got = p["receiver"]
        once = got["received"] == got["unique"] == p["events"]
        lines.append(f"    {name:<12}{p['processes']:>6}{p['seconds']:>9.2f}{p['per_second']:>9.0f}"
                     f"{_fmt(p['receiver_span_per_second'], '{:.0f}'):>9}"
                     f"{got['mean_body_bytes']:>8.0f}{p['cpu_ms_per_event']:>11.3f}"
                     f"{_fmt(p.get('receiver_cpu_ms_per_event'), '{:.3f}'):>10}"
                     f"{_fmt(mb(max(p['peak_rss_kb'])), '{:.1f}'):>13}  {'yes' if once else 'NO'}")
    r = result["ratios"]
    foreign = max(p["foreign_cpu_pct"] for p in result["phases"].values())
    lines.append(f"    other work's share of the CPU during phases: max {foreign:.0f} % "
                 f"(above ~10 %, distrust the rate ratios)")
    lines.append(f"    ratio 1 process / baseline {_fmt(r['one_process_vs_baseline'], '{:.3f}')}, "
                 f"2 processes / 1 {_fmt(r['two_processes_vs_one'], '{:.3f}')}, "
                 f"CPU per event 1 process / "
                 f"baseline {_fmt(r['cpu_per_event_one_process_vs_baseline'], '{:.3f}')}")
    lines.append(f"    ceiling on 2 processes / 1 set by the CPU per event "
                 f"(deliverers + receiver) on "
                 f"{os.cpu_count()} cores: {_fmt(r.get('two_processes_ceiling'), '{:.3f}')}")
    return lines + _target_lines(result["targets"])


def _watcher_table(result):
    sides = list(result["rounds"])
    lines = [f"watcher on {result.get('backend', 'sqlite')} "
             f"(catch-up over {result['blocks']} blocks, "
             f"{result['transfers']} transfers, {result.get('watched')} watched, "
             f"{result.get('max_addresses')} addresses a call, {len(result['rounds']['service'])} "
             "rounds, medians)"]
    lines.append(f"    {'side':<11}{'pass s':>8}{'blocks/s':>10}{'wall s':>8}{'CPU s':>8}"
                 f"   RPC calls")
    for side in sides:
        cpu = sorted(result["cpu_seconds"][side])[len(result["cpu_seconds"][side]) // 2]
        lines.append(f"    {side:<11}{result['median_seconds_inside'][side]:>8.3f}"
                     f"{result['blocks_per_second'][side]:>10.0f}"
                     f"{result['median_seconds'][side]:>8.2f}"
                     f"{cpu:>8.2f}   {result['rpc_calls'].get(side)}")
    lines.append("    ratios: " + ", ".join(f"{name} {_fmt(value, '{:.3f}')}"
                                            for name, value in result["ratios"].items()))
    s = result["steady_state"]
    if s:
        lines.append(f"    steady state (--poll-interval {s['poll_interval_s']} s, "
                     f"{s['watched']} watched, "
                     f"{s['samples']} transfers): confirmed -> payment.completed "
                     f"min {s['min_s']} s, "
                     f"p50 {s['p50_s']} s, p90 {s['p90_s']} s, max {s['max_s']} s "
                     f"(max - min {s['max_minus_min_s']} s); "
                     f"a poll: new block {s['poll_new_block_s']} s "
                     f"(CPU {s['poll_new_block_cpu_s']}), no block {s['poll_no_block_s']} s "
                     f"(CPU {s['poll_no_block_cpu_s']}); a minimal poller: new block "
                     f"{s['minimal_poll_new_block_s']} s, "
                     f"no block {s['minimal_poll_no_block_s']} s")
        if "poll_new_block_rpc_calls" in s:
            lines.append(f"    a poll's RPC calls (HTTP requests): "
                         f"new block {s['poll_new_block_rpc_calls']} "
                         f"({s['poll_new_block_round_trips']}), "
                         f"no block {s['poll_no_block_rpc_calls']} "
                         f"({s['poll_no_block_round_trips']})")
    return lines + _target_lines(result["targets"])


def collect_table(result):
    lines = ["collect (gas per collected address; baseline: 21,000-gas top-up"
             " + one ERC-20 transfer out)",
             f"    {'batch':>6}{'baseline':>10}{'factory':>10}{'no token':>10}{'ratio':>8}"
             f"{'floor':>8}"]
    for row in result["rows"]:
        lines.append(f"    {row['batch']:>6}{row['baseline_gas_per_address']:>10.0f}"
                     f"{row['factory_gas_per_address']:>10.0f}"
                     f"{row['no_token_gas_per_address']:>10.0f}"
                     f"{row['ratio']:>8.3f}{row['floor_ratio']:>8.3f}")
    return lines + _target_lines(result["targets"])


def table(report):
    lines = []
    for result in report["scenarios"]:
        if result.get("skipped"):
            lines.append(f"{result['scenario']}: SKIPPED: {result['skipped']}")
        elif result.get("error"):
            lines.append(f"{result['scenario']}: ERROR: {result['error']}")
        else:
            render = {"delivery": _delivery_table, "watcher": _watcher_table,
                      "collect": collect_table}.get(result["scenario"], _preorder_table)
            lines += render(result)
        lines += [f"    FAILURE: {failure}" for failure in result.get("failures", [])]
    load = report["load_average"]
    lines.append(f"total {report['seconds']:.0f} s; "
                 f"load average (1 min) {load['before'][0]:.1f} before, "
                 f"{load['after'][0]:.1f} after (2 cores: above 2, other work was competing)")
    return "\n".join(lines)
