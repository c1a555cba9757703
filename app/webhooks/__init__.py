"""Webhook delivery (docs/webhooks.md).

Pure, no Flask app and no database: `signing` (Standard Webhooks headers), `ssrf` (which URLs and
addresses may be called), `schedule` (retries, Retry-After, the lease margin), `transport` (one HTTP
attempt; `pinning` sends it to the vetted address, `deadline` bounds it in time). Over the
database: `delivery` (one claimed delivery, an event to an endpoint, sent; its record written in
the caller's transaction through app/data/outbox.py). The worker that claims due deliveries and
runs their attempts in threads is app/worker.py.
"""
