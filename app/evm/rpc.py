"""A small Ethereum JSON-RPC client over `requests`: one Session, connect and read timeouts, and
optionally a deadline over every call it makes (a web request's: `deadline_in`); the errors it
raises, and the values of a node's answers read strictly (quantities, ABI words, block headers).
ERC-20 Transfer logs are read by logs.py, through this client; a step's pins are pins.py's.

The URL is operator-set and may carry a provider's API key in its path or query: it is never
logged or put in an error message (`redacted(url)` gives the scheme and host only).
"""
import json
import re
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

import requests

# geth's default batch limit (BatchRequestLimit); smaller ones are found as refused
MAX_BATCH = 1000

# The finality tags a network may settle by (`networks add --finality`), besides counting.
TAGS = ("safe", "finalized")


class RpcError(Exception):
    """The node could not be reached, answered with an error, or answered something malformed."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code  # the JSON-RPC error code, when the node sent one


class Malformed(RpcError):
    """A value of the node's answer is not what the protocol says (a quantity with a sign, a log
    that is not an ERC-20 Transfer…). Whether that is a fault is the caller's decision."""


class NotATransfer(Malformed):
    """A log in the place of an ERC-20 Transfer whose shape is its contract's doing, not the node's
    (4 topics as an ERC-721 Transfer, an unpadded address topic, data that is not one word). A
    contract nobody registered may emit anything to a deposit address: such a log is not looked at
    (`get_logs`'s `strict`); a registered token's is a fault like any Malformed. `token`: the log's
    contract."""

    def __init__(self, message, token):
        super().__init__(message)
        self.token = token


class ChainMoved(RpcError):
    """The node's answers disagree about a block (a reorganisation, a node on another fork, a log
    marked removed): read the step again."""


class WrongChain(RpcError):
    """The node answers for another chain than the network's: read nothing from it."""


class DeadlinePassed(RpcError):
    """The client's deadline passed before the node answered (or before a call could be sent).
    `asked`: whether this call's request went out (its effect, a broadcast say, may still
    happen)."""

    def __init__(self, message, asked):
        super().__init__(message)
        self.asked = asked


def deadline_in(seconds) -> float:
    """A deadline `seconds` from now, for Client(deadline=…): a time.monotonic() value."""
    return time.monotonic() + float(seconds)


def wrong_chain(url, reported, expected) -> WrongChain:
    return WrongChain(f"{redacted(url)} answers for chain id {reported}, not the network's chain"
                      f" id {expected}: nothing read from it")


def redacted(url: str) -> str:
    """The URL without its path, query or credentials: safe to log."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _timeouts(config):
    """(connect, read) seconds: the CHAIN_RPC_* settings."""
    return (float(config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]),
            float(config["CHAIN_RPC_READ_TIMEOUT_SECONDS"]))


# (connect, read) seconds of a client made without the app's config: the CHAIN_RPC_* settings'
# defaults (app/config.py), so that this module needs no config.
TIMEOUT = (5.0, 20.0)


class Client:
    def __init__(self, url, *, session=None, timeout=TIMEOUT, deadline=None):
        """`deadline`: a time.monotonic() value by which every call must have its answer (None:
        each call bounded by `timeout` alone). Past it a call raises DeadlinePassed without
        asking."""
        self.url = url
        self.session = session or requests.Session()
        self.timeout = timeout
        self.deadline = deadline
        self._next_id = 0
        self.calls = Counter()  # method -> calls made, for the watcher's summary line
        self.max_batch = MAX_BATCH  # calls per batch of headers; halved when the node refuses

    @classmethod
    def from_config(cls, url, config, deadline=None):
        """A client with the app's CHAIN_RPC_* timeouts (and `deadline`, as the constructor's)."""
        return cls(url, timeout=_timeouts(config), deadline=deadline)

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
            if self.deadline is None:
                response = self.session.post(self.url, json=payload, timeout=self.timeout)
                status, content = response.status_code, response.content
            else:
                status, content = self._post_within(what, payload)
        except requests.RequestException as e:
            raise RpcError(f"{what}: {where} unreachable ({type(e).__name__})") from None
        if status in (400, 413):
            try:
                answer = json.loads(content)
            except ValueError:
                answer = None
            if isinstance(answer, dict) and answer.get("error") is not None:
                self._result(f"{what} (HTTP {status})", answer)
        if status != 200:
            raise RpcError(f"{what}: {where} answered HTTP {status}")
        try:
            return json.loads(content)
        except ValueError:
            raise RpcError(f"{what}: {where} answered malformed JSON") from None

    def _post_within(self, what, payload):
        """(HTTP status, body) of the POST, answered before the deadline, else DeadlinePassed.
        requests' timeouts bound each socket operation, not the whole (a node trickling its answer
        byte by byte restarts the read timeout with every byte), so the POST runs in a thread of its
        own, which the caller waits for until the deadline and no longer: the caller is free then,
        and the thread ends soon after (each of its socket operations is bounded by what was left,
        and it stops reading the body once the deadline is past)."""
        deadline, where = self.deadline, redacted(self.url)
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(f"{what}: not sent to {where}: the deadline had passed",
                                 asked=False)
        timeout = tuple(min(t, left) for t in self.timeout) if isinstance(self.timeout, tuple) \
            else min(self.timeout, left)
        outcome = {}
        done = threading.Event()

        def post():
            try:
                response = self.session.post(self.url, json=payload, timeout=timeout, stream=True)
                outcome["response"] = response
                chunks = []
                for chunk in response.iter_content(64 * 1024):
                    if time.monotonic() > deadline:
                        response.close()
                        raise requests.Timeout("past the deadline")
                    chunks.append(chunk)
                outcome["answer"] = (response.status_code, b"".join(chunks))
            except BaseException as e:  # handed to the caller, if it still waits
                outcome["error"] = e
            finally:
                done.set()

        threading.Thread(target=post, name="rpc-deadline", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            response = outcome.get("response")
            if response is not None:  # stop a trickling body now rather than at its next chunk
                try:
                    response.close()
                except Exception:
                    pass
            raise DeadlinePassed(f"{what}: {where} did not answer before the deadline", asked=True)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["answer"]

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

    def batch(self, calls, what=None, tolerate=False):
        """Several calls in one JSON-RPC batch request (one HTTP round trip): their results, in
        order, or RpcError when any failed or the answer does not match the request. `what` names
        the request in an error (default: its first call's method); a failed call is named by its
        own method. `tolerate`: a call that failed gives its RpcError in its place instead (the
        request itself must still be answered whole)."""
        calls = list(calls)
        if not calls:
            return []
        first = self._next_id + 1
        self._next_id += len(calls)
        payload = [{"jsonrpc": "2.0", "id": first + i, "method": method, "params": list(params)}
                   for i, (method, params) in enumerate(calls)]
        for method, _ in calls:
            self.calls[method] += 1
        what = what or calls[0][0]
        body = self._post(what, payload)
        if isinstance(body, dict) and body.get("error") is not None:  # the batch refused whole
            self._result(f"{what} (a batch of {len(calls)})", body)
        if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
            raise RpcError(f"{what}: {redacted(self.url)} answered a non-batch")
        by_id = {item.get("id"): item for item in body}
        results = []
        for i, (method, params) in enumerate(calls):
            item = by_id.get(first + i)
            if item is None:
                raise RpcError(f"{what}: {redacted(self.url)} left a call unanswered")
            try:
                results.append(self._result(_named(method, params), item))
            except RpcError as e:
                if not tolerate:
                    raise
                results.append(e)
        return results

    def pinned(self, calls, pins, what=None):
        """`calls` in one batch after the calls of `pins`, so that one node answers them all: their
        results, once the pins' answers are checked (WrongChain, ChainMoved)."""
        calls = list(calls)
        ahead = pins.calls()
        results = self.batch(ahead + calls, what=what or (calls[0][0] if calls else None))
        pins.check(self.url, results[:len(ahead)])
        return results[len(ahead):]

    def headers(self, numbers, pins=None) -> dict:
        """{number: Header or None} for several blocks, in as few batches as the node takes
        (`max_batch` calls each, halved for good when the node refuses a batch as too large); with
        `pins`, each batch carries them (`pinned`), and a pinned block is their header."""
        numbers = sorted(set(numbers))
        pinned = [n for n in numbers if pins is not None and n in pins.blocks]
        numbers = [n for n in numbers if n not in pinned]
        ahead = len(pins.calls()) if pins is not None else 0
        found, i = {}, 0
        while i < len(numbers):
            chunk = numbers[i:i + max(1, self.max_batch - ahead)]
            calls = [("eth_getBlockByNumber", [hex(n), False]) for n in chunk]
            try:
                results = self.batch(calls) if pins is None else self.pinned(calls, pins)
            except RpcError as e:
                if not is_batch_too_large(e) or self.max_batch <= ahead + 1:
                    raise
                self.max_batch = max(ahead + 1, self.max_batch // 2)
                continue
            i += len(chunk)
            for number, value in zip(chunk, results, strict=True):
                header = _parse_header(value, "eth_getBlockByNumber")
                if header is not None and header.number != number:
                    raise Malformed("eth_getBlockByNumber: a block of another number")
                found[number] = header
        if pinned:
            pins.read(self)
            found.update((n, pins.headers[n]) for n in pinned)
        return found

    def tag_header(self, tag) -> "Header":
        """The node's block of `tag` ("safe", "finalized"); RpcError when the node does not serve
        it (an error, or no such block)."""
        header = _parse_header(self.call("eth_getBlockByNumber", [tag, False]),
                               f"eth_getBlockByNumber(\"{tag}\")")
        if header is None:
            raise RpcError(f"{redacted(self.url)} has no \"{tag}\" block")
        return header

    def header(self, number) -> "Header | None":
        """The canonical block at `number` (None when the node has no such block yet)."""
        return _parse_header(self.call("eth_getBlockByNumber", [hex(number), False]),
                             "eth_getBlockByNumber")


# --- Values of the node's answers, read strictly -------------------------------------------------

HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")


def quantity(value, what) -> int:
    """A JSON-RPC QUANTITY ("0x1a": `0x` then 1 to 64 hex digits, nothing else) as an int, or
    Malformed (an RpcError). Python's int(…, 16) alone would take a sign, spaces or underscores."""
    if (not isinstance(value, str) or not value.startswith("0x") or not 2 < len(value) <= 66
            or not HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not a hex quantity")
    return int(value[2:], 16)


def word(value, what) -> int:
    """One ABI word (`0x` then exactly 64 hex digits: a uint256, e.g. a Transfer log's `data` or a
    `balanceOf` answer) as an int, or Malformed (an RpcError)."""
    if (not isinstance(value, str) or len(value) != 66 or not value.startswith("0x")
            or not HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not one 32-byte ABI word")
    return int(value[2:], 16)


def is_batch_too_large(error: RpcError) -> bool:
    """A batch the node refuses for its size (geth's "batch too large", providers' "batch limit
    exceeded", HTTP 413): the caller sends smaller ones."""
    text = str(error).lower()
    return "http 413" in text or ("batch" in text and any(
        marker in text for marker in ("too large", "too many", "limit", "exceed", "size")))


def _named(method, params) -> str:
    """A call's name in an error: its method, with its block tag when it has one."""
    tag = params[0] if params else None
    if isinstance(tag, str) and not tag.startswith("0x"):
        return f'{method}("{tag}")'
    return method


class Header:
    """A block's number, hash, parent hash and timestamp."""
    __slots__ = ("number", "hash", "parent_hash", "timestamp")

    def __init__(self, number, hash, parent_hash, timestamp):
        self.number, self.hash = number, hash
        self.parent_hash, self.timestamp = parent_hash, timestamp

    def __repr__(self):
        return f"Header({self.number}, {self.hash[:10]}…)"


def _hex(value, chars, what, kind):
    """`value` as lowercase 0x-hex of exactly `chars` characters (the 0x included), else
    Malformed."""
    if (not isinstance(value, str) or len(value) != chars or not value.startswith("0x")
            or not HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not {kind}")
    return value.lower()


def hash32(value, what):
    """`value` as a lowercase 32-byte hash (0x and 64 hex digits), else Malformed."""
    return _hex(value, 66, what, "a 32-byte hash")


def hex_address(value, what):
    """`value` as a lowercase address (0x and 40 hex digits), else Malformed."""
    return _hex(value, 42, what, "an address")


def parse_header(value, what) -> "Header | None":
    """A block object's header fields, strictly parsed (None for null: no such block)."""
    return _parse_header(value, what)


def _parse_header(value, what) -> Header | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Malformed(f"{what}: not a block object")
    return Header(
        number=quantity(value.get("number"), what + ".number"),
        hash=hash32(value.get("hash"), what + ".hash"),
        parent_hash=hash32(value.get("parentHash"), what + ".parentHash"),
        timestamp=quantity(value.get("timestamp"), what + ".timestamp"),
    )
