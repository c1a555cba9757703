"""Waits that double after each consecutive failure or empty poll, up to a cap: the one backoff of
the long-running commands (the webhook worker's idle polls, the chain watcher's failing nodes)."""


def doubling(count: int, base: float, cap: float) -> float:
    """Seconds to wait after `count` (>= 1) consecutive failures or empty polls: base, 2 × base,
    4 × base, … never more than `cap`, however long the outage (no float overflow at any count)."""
    return min(cap, base * 2 ** min(count - 1, 64))
