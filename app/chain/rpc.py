"""A small Ethereum JSON-RPC client over `requests`: one Session, connect and read timeouts.

The URL is operator-set and may carry a provider's API key in its path or query: it is never
logged or put in an error message (`redacted(url)` gives the scheme and host only).
"""
import re
from collections import Counter
from urllib.parse import urlsplit

import requests

from app.config import DEFAULTS


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


def _timeouts(config):
    """(connect, read) seconds: the CHAIN_RPC_* settings."""
    return (float(config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]),
            float(config["CHAIN_RPC_READ_TIMEOUT_SECONDS"]))


class Client:
    def __init__(self, url, *, session=None, timeout=_timeouts(DEFAULTS)):
        self.url = url
        self.session = session or requests.Session()
        self.timeout = timeout
        self._next_id = 0
        self.calls = Counter()  # method -> calls made, for the watcher's summary line

    @classmethod
    def from_config(cls, url, config):
        """A client with the app's CHAIN_RPC_* timeouts."""
        return cls(url, timeout=_timeouts(config))

    def call(self, method, params=()):
        """One JSON-RPC call; its `result`, or RpcError."""
        self._next_id += 1
        self.calls[method] += 1
        payload = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": list(params)}
        body = self._post(method, payload)
        if not isinstance(body, dict):
            raise RpcError(f"{method}: {redacted(self.url)} answered a non-object")
        return self._result(method, body)

    def _post(self, what, payload):
        """POST the payload; the decoded JSON answer, or RpcError (unreachable, not HTTP 200, not
        JSON). `what` names the call in the error, with the URL's host only. Some providers refuse
        a too large eth_getLogs with HTTP 400 or 413 and a JSON-RPC error body: its error is raised
        as on HTTP 200 (code and message), so the caller splits the range alike."""
        where = redacted(self.url)
        try:
            response = self.session.post(self.url, json=payload, timeout=self.timeout)
        except requests.RequestException as e:
            raise RpcError(f"{what}: {where} unreachable ({type(e).__name__})") from None
        if response.status_code in (400, 413):
            try:
                answer = response.json()
            except ValueError:
                answer = None
            if isinstance(answer, dict) and answer.get("error") is not None:
                self._result(f"{what} (HTTP {response.status_code})", answer)
        if response.status_code != 200:
            raise RpcError(f"{what}: {where} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise RpcError(f"{what}: {where} answered malformed JSON") from None

    def _result(self, what, answer):
        """The `result` of one call's answer object, or RpcError (its error, or no result)."""
        where = redacted(self.url)
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else str(error)
            raise RpcError(f"{what}: {where} error {code}: {str(text)[:200]}", code=code)
        if "result" not in answer:
            raise RpcError(f"{what}: {where} answered without a result")
        return answer["result"]

    def block_number(self) -> int:
        return quantity(self.call("eth_blockNumber"), "eth_blockNumber")

    def chain_id(self) -> int:
        return quantity(self.call("eth_chainId"), "eth_chainId")

    def batch(self, calls):
        """Several calls in one JSON-RPC batch request (one HTTP round trip): their results, in
        order, or RpcError when any failed or the answer does not match the request."""
        calls = list(calls)
        if not calls:
            return []
        first = self._next_id + 1
        self._next_id += len(calls)
        payload = [{"jsonrpc": "2.0", "id": first + i, "method": method, "params": list(params)}
                   for i, (method, params) in enumerate(calls)]
        for method, _ in calls:
            self.calls[method] += 1
        what = f"batch of {len(calls)} {calls[0][0]}"
        body = self._post(what, payload)
        if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
            raise RpcError(f"{what}: {redacted(self.url)} answered a non-batch")
        by_id = {item.get("id"): item for item in body}
        results = []
        for i in range(len(calls)):
            item = by_id.get(first + i)
            if item is None:
                raise RpcError(f"{what}: {redacted(self.url)} left a call unanswered")
            results.append(self._result(what, item))
        return results

    def headers(self, numbers, batch_size=50) -> dict:
        """{number: Header or None} for several blocks, in batches of at most `batch_size`."""
        numbers = sorted(set(numbers))
        found = {}
        for i in range(0, len(numbers), batch_size):
            chunk = numbers[i:i + batch_size]
            results = self.batch(("eth_getBlockByNumber", [hex(n), False]) for n in chunk)
            for number, value in zip(chunk, results):
                header = _parse_header(value, "eth_getBlockByNumber")
                if header is not None and header.number != number:
                    raise RpcError("eth_getBlockByNumber: a block of another number")
                found[number] = header
        return found

    def header(self, number) -> "Header | None":
        """The canonical block at `number` (None when the node has no such block yet)."""
        return _parse_header(self.call("eth_getBlockByNumber", [hex(number), False]),
                             "eth_getBlockByNumber")

    def transfer_logs(self, from_block, to_block, tokens, recipients, split=True) -> list:
        """Transfer logs of `tokens` to `recipients` (None: to anyone) in [from_block, to_block],
        in as many eth_getLogs calls as needed: a range the node refuses as too large (or whose
        result is) is split in halves, down to single blocks (`split`; else the error is raised)."""
        try:
            return get_logs(self, from_block, to_block, tokens, recipients)
        except RpcError as e:
            if not split or from_block == to_block or not is_too_large(e):
                raise
        middle = (from_block + to_block) // 2
        return (self.transfer_logs(from_block, middle, tokens, recipients)
                + self.transfer_logs(middle + 1, to_block, tokens, recipients))


_HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")


def quantity(value, what) -> int:
    """A JSON-RPC QUANTITY ("0x1a": `0x` then 1 to 64 hex digits, nothing else) as an int, or
    RpcError. Python's int(…, 16) alone would take a sign, spaces or underscores."""
    if (not isinstance(value, str) or not value.startswith("0x") or not 2 < len(value) <= 66
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise RpcError(f"{what}: not a hex quantity")
    return int(value[2:], 16)


def word(value, what) -> int:
    """One ABI word (`0x` then exactly 64 hex digits: a uint256, e.g. a Transfer log's `data` or a
    `balanceOf` answer) as an int, or RpcError."""
    if (not isinstance(value, str) or len(value) != 66 or not value.startswith("0x")
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise RpcError(f"{what}: not one 32-byte ABI word")
    return int(value[2:], 16)


# --- Blocks and logs: what the chain watcher reads -----------------------------------------------

# keccak256("Transfer(address,address,uint256)"): the topic of every ERC-20 Transfer log.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

# Messages with which common nodes and providers refuse an eth_getLogs whose range or result is too
# large (geth, Erigon, Infura's -32005, Alchemy, QuickNode, public RPCs): the caller splits the range.
_TOO_LARGE = (
    "query returned more than", "response size", "too many", "limit exceeded", "block range",
    "range is too large", "range too large", "exceed", "max results", "results limit",
)


def is_too_large(error: RpcError) -> bool:
    text = str(error).lower()
    return error.code == -32005 or any(marker in text for marker in _TOO_LARGE)


class Header:
    """A block's number, hash, parent hash and timestamp."""
    __slots__ = ("number", "hash", "parent_hash", "timestamp")

    def __init__(self, number, hash, parent_hash, timestamp):
        self.number, self.hash, self.parent_hash, self.timestamp = number, hash, parent_hash, timestamp

    def __repr__(self):
        return f"Header({self.number}, {self.hash[:10]}…)"


class Log:
    """One ERC-20 Transfer log: token contract and addresses lowercase, amount in base units."""
    __slots__ = ("token", "from_address", "to_address", "amount", "tx_hash", "log_index",
                 "block_number", "block_hash")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields[name])


def _hex(value, chars, what, kind):
    """`value` as lowercase 0x-hex of exactly `chars` characters (the 0x included), else RpcError."""
    if (not isinstance(value, str) or len(value) != chars or not value.startswith("0x")
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise RpcError(f"{what}: not {kind}")
    return value.lower()


def _hash32(value, what):
    return _hex(value, 66, what, "a 32-byte hash")


def _address(value, what):
    return _hex(value, 42, what, "an address")


def topic_of(address: str) -> str:
    """An address as an indexed event argument: left-padded to 32 bytes, lowercase."""
    return "0x" + "0" * 24 + address[2:].lower()


TRANSFER_SELECTOR = "a9059cbb"  # transfer(address,uint256)


def transfer_calldata(to: str, amount: int) -> str:
    """The call data of an ERC-20 `transfer(to, amount)` (amount in base units)."""
    return "0x" + TRANSFER_SELECTOR + to[2:].lower().rjust(64, "0") + format(amount, "x").rjust(64, "0")


def _parse_header(value, what) -> Header | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RpcError(f"{what}: not a block object")
    return Header(
        number=quantity(value.get("number"), what + ".number"),
        hash=_hash32(value.get("hash"), what + ".hash"),
        parent_hash=_hash32(value.get("parentHash"), what + ".parentHash"),
        timestamp=quantity(value.get("timestamp"), what + ".timestamp"),
    )


def _parse_log(value) -> Log | None:
    """A Transfer log, or None for a log that is not an ERC-20 Transfer (e.g. ERC-721's, whose
    amount is an indexed token id) or that the node marks as removed."""
    what = "eth_getLogs"
    if not isinstance(value, dict):
        raise RpcError(f"{what}: a log is not an object")
    topics = value.get("topics")
    if not isinstance(topics, list):
        raise RpcError(f"{what}: a log has no topics")
    if value.get("removed") is True:
        return None
    if len(topics) != 3 or str(topics[0]).lower() != TRANSFER_TOPIC:
        return None
    data = value.get("data")
    if not isinstance(data, str) or not data.startswith("0x") or len(data) != 66:
        return None  # not the ERC-20 shape (the amount is one 32-byte word)
    try:
        amount = int(data[2:], 16)
    except ValueError:
        raise RpcError(f"{what}: a log's data is not hex") from None
    return Log(
        token=_address(value.get("address"), what + ".address"),
        from_address="0x" + _hash32(topics[1], what + ".topics")[-40:],
        to_address="0x" + _hash32(topics[2], what + ".topics")[-40:],
        amount=amount,
        tx_hash=_hash32(value.get("transactionHash"), what + ".transactionHash"),
        log_index=quantity(value.get("logIndex"), what + ".logIndex"),
        block_number=quantity(value.get("blockNumber"), what + ".blockNumber"),
        block_hash=_hash32(value.get("blockHash"), what + ".blockHash"),
    )


def get_logs(client, from_block, to_block, tokens, recipients) -> list[Log]:
    """One eth_getLogs call: Transfer logs of `tokens` to `recipients` (None: anyone) in the range."""
    topics = [TRANSFER_TOPIC] if recipients is None else [
        TRANSFER_TOPIC, None, [topic_of(a) for a in recipients]]
    result = client.call("eth_getLogs", [{
        "fromBlock": hex(from_block), "toBlock": hex(to_block), "address": list(tokens),
        "topics": topics,
    }])
    if not isinstance(result, list):
        raise RpcError("eth_getLogs: the result is not a list")
    logs = [log for log in map(_parse_log, result) if log is not None]
    for log in logs:
        if not from_block <= log.block_number <= to_block:
            raise RpcError("eth_getLogs: a log outside the range asked for")
    return logs

