"""The JSON the service shows: Process objects, pages of them, and webhook event bodies.

Built as text so that the amount literal and the stored metadata JSON go out byte for byte as they
came in (no float, no re-encoding). Key order follows API.md.
"""
import json
from datetime import datetime, timezone
from functools import lru_cache


@lru_cache(maxsize=4096)
def iso(ts: int) -> str:
    return datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bool(value):
    return "true" if value else "false"


def process_json(p, now) -> str:
    status = p.effective_status(now)
    updated = p.expires_at if status == "expired" and p.status == "pending" else p.updated_at
    return (
        f'{{"processId":"{p.id}","status":"{status}","amount":{p.amount},'
        f'"metadata":{p.metadata},"livemode":{_bool(p.livemode)},'
        f'"createdAt":"{iso(p.created_at)}","updatedAt":"{iso(updated)}",'
        f'"expiresAt":"{iso(p.expires_at)}"}}'
    )


def public_process_json(p, now) -> str:
    """What a browser may see: never the metadata (it can hold e-mails)."""
    return (
        f'{{"processId":"{p.id}","status":"{p.effective_status(now)}","amount":{p.amount},'
        f'"expiresAt":"{iso(p.expires_at)}","livemode":{_bool(p.livemode)}}}'
    )


def page_json(processes, has_more, now) -> str:
    items = ",".join(process_json(p, now) for p in processes)
    return f'{{"data":[{items}],"hasMore":{_bool(has_more)}}}'


def event_json(event_type, timestamp, process_object_json) -> str:
    return (
        f'{{"type":{json.dumps(event_type)},"timestamp":"{iso(timestamp)}",'
        f'"data":{process_object_json}}}'
    )
