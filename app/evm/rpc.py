"""A small Ethereum JSON-RPC client over `requests`: one Session, connect and read timeouts, and
optionally a deadline over every call it makes (a web request's: `deadline_in`).

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

MAX_BATCH = 1000  # geth's default batch limit (BatchRequestLimit); smaller ones are found as refused
LOGS_PER_BATCH = 20  # eth_getLogs calls of address chunks sent in one batch (each may be heavy)

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
    `asked`: whether this call's request went out (its effect, a broadcast say, may still happen)."""

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
        each call bounded by `timeout` alone). Past it a call raises DeadlinePassed without asking."""
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
            raise DeadlinePassed(f"{what}: not sent to {where}: the deadline had passed", asked=False)
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
            for number, value in zip(chunk, results):
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

    def transfer_logs(self, from_block, to_block, tokens, recipients, split=True,
                      pins=None, strict=None) -> list:
        """Transfer logs of `tokens` (None: any contract) to `recipients` (None: to anyone) in
        [from_block, to_block], in as many eth_getLogs calls as needed: a range the node refuses as
        too large (or whose result is) is split in halves, down to single blocks (`split`; else the
        error is raised). With `pins`, each call is sent in a batch with them; `strict`: get_logs's."""
        try:
            return get_logs(self, from_block, to_block, tokens, recipients, pins, strict)
        except RpcError as e:
            if not split or from_block == to_block or not is_too_large(e):
                raise
        middle = (from_block + to_block) // 2
        return (self.transfer_logs(from_block, middle, tokens, recipients, pins=pins, strict=strict)
                + self.transfer_logs(middle + 1, to_block, tokens, recipients, pins=pins,
                                     strict=strict))

    def transfer_logs_by_chunks(self, from_block, to_block, chunks, pins=None, strict=None) -> list:
        """The Transfer logs of any contract to each chunk of recipients in the range: the chunks'
        eth_getLogs calls LOGS_PER_BATCH to a batch (each batch with `pins`), so many deposit
        addresses cost few round trips. A batch the node refuses (too large a batch, range or
        result) is asked again chunk by chunk (`transfer_logs`, which splits the range)."""
        logs = []
        for i in range(0, len(chunks), LOGS_PER_BATCH):
            group = chunks[i:i + LOGS_PER_BATCH]
            if len(group) == 1:
                logs += self.transfer_logs(from_block, to_block, None, group[0], pins=pins,
                                           strict=strict)
                continue
            calls = [_logs_call(from_block, to_block, None, chunk) for chunk in group]
            try:
                results = self.batch(calls) if pins is None else self.pinned(calls, pins)
            except RpcError as e:
                if not (is_too_large(e) or is_batch_too_large(e)):
                    raise
                for chunk in group:
                    logs += self.transfer_logs(from_block, to_block, None, chunk, pins=pins,
                                               strict=strict)
                continue
            for result in results:
                logs += parse_logs(result, from_block, to_block, None, strict)
        return logs


_HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")


def quantity(value, what) -> int:
    """A JSON-RPC QUANTITY ("0x1a": `0x` then 1 to 64 hex digits, nothing else) as an int, or
    Malformed (an RpcError). Python's int(…, 16) alone would take a sign, spaces or underscores."""
    if (not isinstance(value, str) or not value.startswith("0x") or not 2 < len(value) <= 66
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not a hex quantity")
    return int(value[2:], 16)


def word(value, what) -> int:
    """One ABI word (`0x` then exactly 64 hex digits: a uint256, e.g. a Transfer log's `data` or a
    `balanceOf` answer) as an int, or Malformed (an RpcError)."""
    if (not isinstance(value, str) or len(value) != 66 or not value.startswith("0x")
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not one 32-byte ABI word")
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
    """`value` as lowercase 0x-hex of exactly `chars` characters (the 0x included), else Malformed."""
    if (not isinstance(value, str) or len(value) != chars or not value.startswith("0x")
            or not _HEX_DIGITS.fullmatch(value, 2)):
        raise Malformed(f"{what}: not {kind}")
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
        hash=_hash32(value.get("hash"), what + ".hash"),
        parent_hash=_hash32(value.get("parentHash"), what + ".parentHash"),
        timestamp=quantity(value.get("timestamp"), what + ".timestamp"),
    )


class Pins:
    """What every batch of one step must agree on: the block at each pinned number (under its hash
    when known, else the step's first answer's; it must exist) and, when no block is pinned under a
    hash kept from earlier steps (which names the chain), the network's chain id. Sent ahead of the
    step's calls in each of its batches (`Client.pinned`): a node that answers a batch proves it
    holds these very blocks, so the logs and headers it gives in the same batch are of the chain
    through them (a block's hash commits to every block below it). `headers`: {number: Header}.
    Under a finality mode each batch also asks the node's block of the tag, so that no batch's
    depth rests on another node's word: `lowest_tag` keeps the lowest answer."""

    def __init__(self, chain_id, blocks, tag=None):
        self.chain_id = chain_id  # None: not asked
        self.blocks = dict(blocks)  # number -> the hash it must have, or None: the first answer's
        self.headers = {}
        self.tag = tag  # "safe"/"finalized": asked in every batch too (None: not asked)
        self.lowest_tag = None  # the lowest Header any batch answered for it

    def calls(self):
        asked = [] if self.chain_id is None else [("eth_chainId", [])]
        tag = [] if self.tag is None else [("eth_getBlockByNumber", [self.tag, False])]
        return asked + [("eth_getBlockByNumber", [hex(n), False]) for n in self.blocks] + tag

    def check(self, url, results):
        """WrongChain or ChainMoved unless `results` (of `calls()`) agree with the pins."""
        if self.chain_id is not None:
            reported = quantity(results[0], "eth_chainId")
            if reported != self.chain_id:
                raise wrong_chain(url, reported, self.chain_id)
            results = results[1:]
        if self.tag is not None:
            self._tagged(url, results[-1])
            results = results[:-1]
        for (number, expected), value in zip(self.blocks.items(), results):
            header = _parse_header(value, "eth_getBlockByNumber")
            if header is None:
                raise ChainMoved(f"block {number}: not on the node that answered")
            if header.number != number:
                raise Malformed("eth_getBlockByNumber: a block of another number")
            if expected is None and number in self.headers:
                expected = self.headers[number].hash
            if expected is not None and header.hash != expected:
                raise ChainMoved(f"block {number} is {header.hash}, not {expected}: the chain moved"
                                 " or the node is on another fork")
            self.headers.setdefault(number, header)

    def _tagged(self, url, value):
        """A batch's answer for the tag: kept when the lowest yet (a node without it: a fault)."""
        header = _parse_header(value, f'eth_getBlockByNumber("{self.tag}")')
        if header is None:
            raise RpcError(f'{redacted(url)} has no "{self.tag}" block')
        if self.lowest_tag is None or header.number < self.lowest_tag.number:
            self.lowest_tag = header

    def read(self, client):
        """The pinned blocks alone, in one batch, unless a batch already read them."""
        if len(self.headers) < len(self.blocks):
            client.pinned([], self, what="eth_getBlockByNumber")


def parse_transfer_log(value) -> Log:
    """An ERC-20 Transfer log (3 topics, the amount one 32-byte word in `data`), parsed strictly:
    ChainMoved for a log the node marks `"removed": true` (its block left the chain while it
    answered); Malformed for a field the node writes that is not of its form (the contract's
    address, the transaction hash, log index, block number and hash, the topics' 32-byte words);
    NotATransfer (a Malformed) for a shape the contract chose: another event, an ERC-721 Transfer,
    an unpadded address, data that is not one word. The node's fields are checked first, so a
    NotATransfer is a well-formed log of another shape. Whether it is a fault is the caller's
    decision."""
    what = "eth_getLogs"
    if not isinstance(value, dict):
        raise Malformed(f"{what}: a log is not an object")
    removed = value.get("removed", False)
    if removed is True:
        raise ChainMoved(f"{what}: a log marked removed (its block left the chain)")
    if removed is not False:
        raise Malformed(f"{what}: a log's removed is not a boolean")
    token = _address(value.get("address"), what + ".address")
    envelope = dict(
        token=token,
        tx_hash=_hash32(value.get("transactionHash"), what + ".transactionHash"),
        log_index=quantity(value.get("logIndex"), what + ".logIndex"),
        block_number=quantity(value.get("blockNumber"), what + ".blockNumber"),
        block_hash=_hash32(value.get("blockHash"), what + ".blockHash"),
    )
    topics = value.get("topics")
    if not isinstance(topics, list) or len(topics) > 4:
        raise Malformed(f"{what}: a log's topics are not a list of at most 4")
    topics = [_hash32(topic, what + ".topics") for topic in topics]
    if len(topics) != 3:
        raise NotATransfer(f"{what}: a log that is not an ERC-20 Transfer (not 3 topics)", token)
    if topics[0] != TRANSFER_TOPIC:
        raise NotATransfer(f"{what}: a log that is not a Transfer", token)
    data = value.get("data")
    if (not isinstance(data, str) or not data.startswith("0x")
            or len(data) > 2 and not _HEX_DIGITS.fullmatch(data, 2)):
        raise Malformed(f"{what}.data: not hex bytes")
    return Log(
        from_address=_topic_address(topics[1], token),
        to_address=_topic_address(topics[2], token),
        amount=_transfer_amount(data, token),
        **envelope,
    )


def _transfer_amount(data, token):
    """The Transfer's value: `data` must be exactly one ABI word."""
    if len(data) != 66:
        raise NotATransfer("eth_getLogs.data: not one 32-byte ABI word", token)
    return int(data[2:], 16)


def _topic_address(topic, token):
    """An indexed address (a checked 32-byte topic): 12 zero bytes, then the address."""
    if not topic.startswith("0x" + "0" * 24):
        raise NotATransfer("eth_getLogs.topics: not an address", token)
    return "0x" + topic[-40:]


def get_logs(client, from_block, to_block, tokens, recipients, pins=None, strict=None) -> list[Log]:
    """One eth_getLogs call: Transfer logs of `tokens` (None: of any contract) to `recipients`
    (None: anyone) in the range; with `pins`, in one batch after them (`Client.pinned`). Every log
    must be in the range and of a contract asked for, its node's fields well-formed (else RpcError:
    a fault). A log whose shape is its contract's doing (NotATransfer) is a fault when its contract
    is in `strict` (lowercase; None: every contract), else it is left out: a contract nobody
    registered cannot make a poll fail."""
    call = _logs_call(from_block, to_block, tokens, recipients)
    result = client.call(*call) if pins is None else client.pinned([call], pins)[0]
    return parse_logs(result, from_block, to_block, tokens, strict)


def _logs_call(from_block, to_block, tokens, recipients):
    topics = [TRANSFER_TOPIC] if recipients is None else [
        TRANSFER_TOPIC, None, [topic_of(a) for a in recipients]]
    params = {"fromBlock": hex(from_block), "toBlock": hex(to_block), "topics": topics}
    if tokens is not None:
        params["address"] = list(tokens)
    return ("eth_getLogs", [params])


def parse_logs(result, from_block, to_block, tokens, strict) -> list[Log]:
    """An eth_getLogs answer, checked as `get_logs` says."""
    if not isinstance(result, list):
        raise Malformed("eth_getLogs: the result is not a list")
    asked = None if tokens is None else {token.lower() for token in tokens}
    logs = []
    for value in result:
        try:
            log = parse_transfer_log(value)
        except NotATransfer as e:
            if strict is None or e.token in strict:
                raise
            continue
        if not from_block <= log.block_number <= to_block:
            raise Malformed("eth_getLogs: a log outside the range asked for")
        if asked is not None and log.token not in asked:
            raise Malformed("eth_getLogs: a log of a contract not asked for")
        logs.append(log)
    return logs
