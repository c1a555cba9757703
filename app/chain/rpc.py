"""A small Ethereum JSON-RPC client over `requests`: one Session, connect and read timeouts.

The URL is operator-set and may carry a provider's API key in its path or query: it is never
logged or put in an error message (`redacted(url)` gives the scheme and host only).
"""
from urllib.parse import urlsplit

import requests

CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 20


class RpcError(Exception):
    """The node could not be reached, answered with an error, or answered something malformed."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code  # the JSON-RPC error code, when the node sent one


def redacted(url: str) -> str:
    """The URL without its path, query or credentials: safe to log."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


class Client:
    def __init__(self, url, *, session=None, timeout=(CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)):
        self.url = url
        self.session = session or requests.Session()
        self.timeout = timeout
        self._next_id = 0

    def call(self, method, params=()):
        """One JSON-RPC call; its `result`, or RpcError."""
        self._next_id += 1
        payload = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": list(params)}
        where = redacted(self.url)
        try:
            response = self.session.post(self.url, json=payload, timeout=self.timeout)
        except requests.RequestException as e:
            raise RpcError(f"{method}: {where} unreachable ({type(e).__name__})") from None
        if response.status_code != 200:
            raise RpcError(f"{method}: {where} answered HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise RpcError(f"{method}: {where} answered malformed JSON") from None
        if not isinstance(body, dict):
            raise RpcError(f"{method}: {where} answered a non-object")
        error = body.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else str(error)
            raise RpcError(f"{method}: {where} error {code}: {str(text)[:200]}", code=code)
        if "result" not in body:
            raise RpcError(f"{method}: {where} answered without a result")
        return body["result"]

    def block_number(self) -> int:
        return _quantity(self.call("eth_blockNumber"), "eth_blockNumber")

    def chain_id(self) -> int:
        return _quantity(self.call("eth_chainId"), "eth_chainId")


def _quantity(value, what) -> int:
    """A JSON-RPC QUANTITY ("0x1a") as an int, or RpcError."""
    if not isinstance(value, str) or not value.startswith("0x") or len(value) > 66:
        raise RpcError(f"{what}: not a hex quantity")
    try:
        return int(value, 16)
    except ValueError:
        raise RpcError(f"{what}: not a hex quantity") from None
