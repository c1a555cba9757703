"""Request bodies whose framing is broken, sent byte for byte over raw sockets to the real servers
(tests/deploy/test_request_framing.py, and through nginx in tests/deploy/test_reverse_proxy.py), and
the count of stored processes that shows none of them was stored."""
from support import dbutil

BODY = b'{"amount": 5}'

# Chunked bodies that are not chunked encoding: a size that is not hex, a negative size, a chunk
# not followed by its CRLF, and a body that ends before its last (zero) chunk.
BROKEN_CHUNKED = {
    "size zz": b"zz\r\n" + BODY + b"\r\n0\r\n\r\n",
    "size -c": b"-c\r\n" + BODY[:12] + b"\r\n0\r\n\r\n",
    "no CRLF after the chunk": b"%x\r\n" % len(BODY) + BODY + b"XX0\r\n\r\n",
    "no last chunk": b"%x\r\n" % len(BODY) + BODY + b"\r\n",
}


def count_processes(env):
    """The processes stored in the database of a service started with `servers.service_env`."""
    return dbutil.scalar(env["FLASK_DATABASE"], "SELECT count(*) FROM processes")
