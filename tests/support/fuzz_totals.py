"""Counts of the schemathesis run (operations, cases, failures, statuses seen), printed at the end
of pytest by conftest.pytest_terminal_summary."""
from collections import Counter, defaultdict

cases = Counter()  # operation label -> requests sent
failures = Counter()  # operation label -> cases whose checks failed
statuses = defaultdict(Counter)  # operation label -> status code -> responses


def record(label, status, failed):
    """One request of operation `label` ("METHOD /path", "stateful " in front for linked calls)."""
    cases[label] += 1
    if status is not None:
        statuses[label][status] += 1
    if failed:
        failures[label] += 1


def summary():
    if not cases:
        return None
    operations = {label.removeprefix("stateful ") for label in cases}
    lines = [
        f"schemathesis: {len(operations)} operations, {sum(cases.values())} cases,"
        f" {sum(failures.values())} failures"
    ]
    for label in sorted(cases):
        seen = ", ".join(f"{code}×{n}" for code, n in sorted(statuses[label].items()))
        lines.append(f"  {label}: {cases[label]} cases, {failures[label]} failures ({seen})")
    return "\n".join(lines)
