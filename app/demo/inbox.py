"""The demo shop's webhook inbox: the last deliveries its built-in receiver got, in memory.

Single-process demo only: each server process keeps its own list (`flask run`, as under `make run`,
is one process), and a restart empties it. It is not how a merchant should store webhooks.

Receivers must deduplicate on `webhook-id` (delivery is at least once): a verified delivery whose
id was already received verified is counted on the first entry (`repeats`) instead of listed again.
An unverified delivery is always listed: it proves nothing about the id it claims.
"""
import threading
from collections import deque

KEEP = 100


class WebhookInbox:
    def __init__(self, keep=KEEP):
        self._lock = threading.Lock()
        self._items = deque(maxlen=keep)  # newest first

    def add(self, *, received_at, webhook_id, type, verified, reason, body_pretty):
        """Record one delivery; returns False when it was a verified repeat of a listed one."""
        with self._lock:
            if verified:
                for item in self._items:
                    if item["verified"] and item["webhook_id"] == webhook_id:
                        item["repeats"] += 1
                        return False
            self._items.appendleft({
                "received_at": received_at, "webhook_id": webhook_id, "type": type,
                "verified": verified, "reason": reason, "body_pretty": body_pretty, "repeats": 0,
            })
            return True

    def deliveries(self):
        """Newest first, as copies."""
        with self._lock:
            return [dict(item) for item in self._items]
