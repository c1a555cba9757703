"""Webhook delivery (docs/webhooks.md).

Pure, no Flask app and no database: `signing` (Standard Webhooks headers), `ssrf` (which URLs and
addresses may be called), `schedule` (retries, Retry-After, the lease margin), `transport` (one HTTP
attempt; `pinning` sends it to the vetted address, `deadline` bounds it in time). Over the
database: `delivery` (one claimed event sent, and its record written in the caller's transaction)
and `worker` (claims due events, runs attempts in threads, records them).
"""
