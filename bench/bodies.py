"""Request and webhook bodies used by the benchmarks, written compactly as a client would send them.

    python -m bench.bodies preorder       # the realistic preorder body
                                          # (amount + order ref + e-mail)
    python -m bench.bodies preorder-9kb   # the same with ~9 KB of metadata (line items)
    python -m bench.bodies event          # a webhook event body of the service's shape
"""
import json
import sys

ORDER_METADATA = {"orderRef": "A-1042", "email": "buyer@example.com"}
METADATA_9KB = 9 * 1024  # compact UTF-8 size aimed at; the service accepts up to 10,240 bytes


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def line_items_metadata(target_bytes):
    """Order metadata padded with realistic line items until its compact encoding reaches the
    target."""
    metadata = dict(ORDER_METADATA, items=[])
    n = 0
    while len(compact(metadata).encode()) < target_bytes:
        n += 1
        metadata["items"].append(
            {"sku": f"SKU-{n:05d}", "name": f"Ceramic mug, blue glaze #{n}", "qty": 1 + n % 3,
             "unitPrice": "12.50"}
        )
    if len(compact(metadata).encode()) > target_bytes:
        metadata["items"].pop()
    return metadata


def preorder_body(metadata_bytes=None):
    metadata = line_items_metadata(metadata_bytes) if metadata_bytes else ORDER_METADATA
    return {"amount": 19.99, "metadata": metadata}


PREORDER_BODIES = {"preorder": lambda: preorder_body(),
                   "preorder-9kb": lambda: preorder_body(METADATA_9KB)}


def event_body(size=None):
    """A `process.cancelled` event as the contract shows it; padded with spaces to `size` bytes if
    given."""
    process = {
        "processId": "7d7c1a52-4a4b-4f0e-9d55-2b1f6c1f8a10", "status": "cancelled", "amount": 19.99,
        "metadata": ORDER_METADATA, "livemode": False, "createdAt": "2026-11-22T10:00:00Z",
        "updatedAt": "2026-11-22T10:01:00Z", "expiresAt": "2026-11-22T10:30:00Z",
    }
    body = compact({"type": "process.cancelled", "timestamp": "2026-11-22T10:01:00Z",
                    "data": process})
    body = body.encode()
    if size and size > len(body):
        body = body[:-1] + b" " * (size - len(body)) + b"}"
    return body


def main(argv):
    name = argv[1] if len(argv) > 1 else "preorder"
    sys.stdout.write(event_body().decode() if name == "event" else compact(PREORDER_BODIES[name]()))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
