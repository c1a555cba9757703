"""A JSON-RPC endpoint on loopback in front of the real test node that misbehaves on demand, as one
URL in front of a provider's pool of nodes would: down (`down()`: its port refuses connections
until `up()`), hanging or slow calls, HTTP errors, JSON-RPC errors, malformed JSON, a head going
backwards, "result too large" for wide eth_getLogs ranges, logs marked `"removed": true` or whose
`data` word is hostile (`fail`, once; `always`, until `clear`), a node's own answer to a method
(`lie`: a tip of 1,000 gwei), and requests answered by another node (`route`): another real node
(another chain's), or a node left on an abandoned fork (`StaleFork`, recorded from the real node
before a reorganisation). `estimates_on_latest`: eth_estimateGas without a block runs on the latest
state, as geth's does (Hardhat's runs on its pending one).

It also plays a node's view of finality and time: `tag(name, number)` serves the `safe` or
`finalized` block as the real node's block `number`, whatever `latest` is (`refuse(name)`: an
error, as a node without the tag answers); `freeze()` holds the head where it is (a stuck node:
the blocks above it do not exist for it, `latest` is that block); `latency` adds seconds to every
round trip (a provider across a network).

A JSON-RPC batch is one request, answered by one node, as a provider's load balancer does; a fault
of a method applies to each of its calls, alone or in a batch (an HTTP-level fault to the whole
request). A fault or a route may name a method (`eth_getBlockByNumber`) or a method with its block
tag (`eth_getBlockByNumber:latest`: the head's read). Every call it does not spoil goes to the real
node unchanged."""
import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

# Faults that spoil the whole HTTP request; the others spoil the answer of their call only.
REQUEST_FAULTS = ("hang", "slow", "http500", "http400", "malformed")
# `data` words a lying node may send for a log: each still 66 characters, each taken by int(…, 16).
HOSTILE_DATA = {
    "data-minus": lambda digits: "0x-" + digits[1:],
    "data-plus": lambda digits: "0x+" + digits[1:],
    "data-underscore": lambda digits: "0x" + digits[1:-6] + "_" + digits[-6:],
    "data-space": lambda digits: "0x " + digits[1:],
}


class FaultyRpc:
    def __init__(self, upstream, path="/v3/SECRET-PROJECT-KEY"):
        self.upstream = upstream
        self.queued = defaultdict(list)  # method -> faults for its next calls, in order
        self.sticky = {}  # method -> a fault for every call until `clear`
        self.routes = []  # [method or None, node, calls left (None: always), every, seen]
        self.max_log_range = None  # eth_getLogs over more blocks than this: "too many results"
        self.too_large_status = 200  # the HTTP status of that refusal (some providers send 400/413)
        self.calls = Counter()
        self.requests = 0
        self.lock = threading.Lock()
        self.slow_started = threading.Event()  # set when a "slow" call arrives
        self.hooks = {}  # method -> [requests with it to let through first, function run before]
        self.tags = {}  # "safe"/"finalized" -> the block number served for it, or None: refused
        self.frozen = None  # the head block number while frozen
        self.latency = 0.0  # seconds added to every request
        self.estimates_on_latest = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = fake.answer(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout)
                    pass

        self._handler = Handler
        self.server = None
        self.up()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def up(self, port=0):
        """Listen (again, on the same port after `down()`)."""
        if self.server is not None:
            port = self.server.server_address[1]
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler)
        self.server.daemon_threads = True
        self.listening = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self):
        """Stop listening: every call is refused (ECONNREFUSED) until `up()`."""
        self.server.shutdown()
        self.server.server_close()
        self.listening = False

    def fail(self, method, *faults):
        """Spoil the next calls of `method`, one fault each, in order."""
        with self.lock:
            self.queued[method].extend(faults)

    def always(self, method, fault):
        """Spoil every call of `method` until `clear()`."""
        with self.lock:
            self.sticky[method] = fault

    def route(self, node, method=None, times=None, every=1):
        """Let `node` (another node's URL, or a StaleFork) answer the requests holding a call of
        `method` (None: any request): the next `times` of them (None: all), every `every`-th one
        (2: every other, starting with the next)."""
        with self.lock:
            self.routes.append([method, node, times, every, 0])

    def lie(self, method, result):
        """Answer every call of `method` with `result` until `clear()`."""
        self.always(method, ("result", result))

    def clear(self):
        """Honest again: no fault, every request to the real node (tags, freeze and latency stay
        as set)."""
        with self.lock:
            self.queued.clear()
            self.sticky.clear()
            self.routes.clear()

    def tag(self, name, number):
        """Serve the real node's block `number` as the `name` ("safe", "finalized") block."""
        with self.lock:
            self.tags[name] = number

    def refuse(self, name):
        """Answer an error for the `name` block, as a node that does not serve that tag."""
        with self.lock:
            self.tags[name] = None

    def freeze(self):
        """Hold the head at the real node's current block until `thaw()`."""
        head = int(_ask(self.upstream, [{"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber",
                                         "params": []}])[0]["result"], 16)
        with self.lock:
            self.frozen = head
        return head

    def thaw(self):
        with self.lock:
            self.frozen = None

    def before(self, method, after, function):
        """Run `function` (e.g. a reorganisation of the node) before passing on the request that
        holds a call of `method` and follows the next `after` such requests."""
        with self.lock:
            self.hooks[method] = [after, function]

    def _take(self, items):
        """Under the lock: each call's fault, the hooks to run, the node that answers."""
        methods = [item["method"] for item in items]
        self.calls.update(methods)
        self.requests += 1
        faults = []
        for item in items:
            fault = None
            for method in (_tagged(item), item["method"]):  # the tagged name first
                if self.queued[method]:
                    fault = self.queued[method].pop(0)
                    break
                if method in self.sticky:
                    fault = self.sticky[method]
                    break
            faults.append(fault)
        tagged = [_tagged(item) for item in items if _tagged(item) != item["method"]]
        self.calls.update(tagged)  # also counted by their method
        methods += tagged
        hooks = []
        for method in set(methods):
            hook = self.hooks.get(method)
            if hook is None:
                continue
            if hook[0] == 0:
                del self.hooks[method]
                hooks.append(hook[1])
            else:
                hook[0] -= 1
        node = self.upstream
        for route in self.routes:
            method, target, left, every, seen = route
            if method is not None and method not in methods:
                continue
            route[4] += 1
            if left is not None and left <= 0:
                continue
            if seen % every == 0:
                if left is not None:
                    route[2] -= 1
                node = target
                break
        return faults, hooks, node

    def answer(self, body):
        batch = isinstance(body, list)
        items = body if batch else [body]
        if self.latency:
            time.sleep(self.latency)
        with self.lock:
            faults, hooks, node = self._take(items)
            tags, frozen = dict(self.tags), self.frozen
        for hook in hooks:
            hook()
        request_fault = next((f for f in faults if f in REQUEST_FAULTS), None)
        if request_fault == "hang":
            time.sleep(3)
        elif request_fault == "slow":  # answered, after two seconds
            self.slow_started.set()
            time.sleep(2)
        elif request_fault == "http500":
            return 500, b"<html>Internal Server Error</html>"
        elif request_fault == "http400":  # a JSON-RPC error on an HTTP error status
            return 400, self._json({"jsonrpc": "2.0", "id": None if batch else body["id"],
                                    "error": {"code": -32602, "message": "invalid params"}})
        elif request_fault == "malformed":
            return 200, b'{"jsonrpc": "2.0", "id": 1, "result": '
        refused = [self._too_large(item) for item in items]
        if self.too_large_status != 200 and any(refused):
            return self.too_large_status, self._json(next(r for r in refused if r))
        asked = [_as_seen(self._as_geth(item), tags, frozen) for item in items]
        answers = [{"jsonrpc": "2.0", "id": item["id"], **ready} if ready is not None else None
                   for item, (_, ready) in zip(items, asked, strict=True)]
        pending = [(i, item) for i, (item, ready) in enumerate(asked) if ready is None]
        if pending:
            for (i, _), got in zip(pending, _ask(node, [item for _, item in pending]), strict=True):
                answers[i] = got
        for i, (item, fault) in enumerate(zip(items, faults, strict=True)):
            answers[i] = refused[i] or _spoiled(item, answers[i], fault, node)
        return 200, self._json(answers if batch else answers[0])

    def _as_geth(self, item):
        params = item.get("params") or []
        if self.estimates_on_latest and item["method"] == "eth_estimateGas" and len(params) == 1:
            return dict(item, params=[params[0], "latest"])
        return item

    def _too_large(self, item):
        """The node's refusal of an eth_getLogs over more than `max_log_range` blocks, or None."""
        if item["method"] != "eth_getLogs" or self.max_log_range is None:
            return None
        query = item["params"][0]
        if int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1 <= self.max_log_range:
            return None
        return {"jsonrpc": "2.0", "id": item["id"], "error": {
            "code": -32005, "message": "query returned more than 10000 results"}}

    @staticmethod
    def _json(value):
        return json.dumps(value).encode()

    def close(self):
        if self.listening:
            self.down()


def _tagged(item):
    """A call's name for faults and routes: `eth_getBlockByNumber:latest` for a tagged block
    read."""
    params = item.get("params") or []
    if item["method"] == "eth_getBlockByNumber" and params and not str(params[0]).startswith("0x"):
        return f"eth_getBlockByNumber:{params[0]}"
    return item["method"]


def _as_seen(item, tags, frozen):
    """(the call to pass on, None) or (None, the answer's result or error) as this node sees the
    chain: tags served at their set block (or refused), the head held at `frozen`."""
    method, params = item["method"], item.get("params") or []
    if method == "eth_blockNumber" and frozen is not None:
        return None, {"result": hex(frozen)}
    if method == "eth_getBlockByNumber" and params:
        block = params[0]
        if block in tags:
            if tags[block] is None:
                return None, {"error": {"code": -32000, "message": f"unknown block tag {block}"}}
            block = hex(min(tags[block], frozen) if frozen is not None else tags[block])
        elif block == "latest" and frozen is not None:
            block = hex(frozen)
        if frozen is not None and block.startswith("0x") and int(block, 16) > frozen:
            return None, {"result": None}
        return dict(item, params=[block] + list(params[1:])), None
    if method == "eth_getLogs" and frozen is not None:
        query = dict(params[0])
        if int(query["fromBlock"], 16) > frozen:
            return None, {"result": []}
        query["toBlock"] = hex(min(int(query["toBlock"], 16), frozen))
        return dict(item, params=[query]), None
    return item, None


def _ask(node, items):
    """The answers of `node` (a URL: in one request, a batch when several; or a StaleFork)."""
    if isinstance(node, StaleFork):
        return [node.answer(item) for item in items]
    if len(items) == 1:
        return [requests.post(node, json=items[0], timeout=30).json()]
    by_id = {a["id"]: a for a in requests.post(node, json=items, timeout=30).json()}
    return [by_id[item["id"]] for item in items]


def _spoiled(item, answer, fault, node):
    """`answer` as the fault makes it (unchanged without one)."""
    if fault is None or fault in REQUEST_FAULTS or "result" not in answer:
        return answer
    answer = dict(answer)
    if isinstance(fault, tuple) and fault[0] == "result":  # `lie`
        answer["result"] = fault[1]
    elif fault == "error":
        del answer["result"]
        answer["error"] = {"code": -32000, "message": "header not found"}
    elif fault == "gas-too-large":  # an estimate's refusal, as geth words it
        del answer["result"]
        answer["error"] = {"code": -32000, "message": "exceeds block gas limit"}
    elif fault == "garbage-result":
        answer["result"] = {"oops": 1}
    elif fault == "backwards" and isinstance(answer["result"], dict):  # a head block 5 below
        below = hex(max(0, int(answer["result"]["number"], 16) - 5))
        answer["result"] = _ask(node, [{"jsonrpc": "2.0", "id": 1, "method":
                                "eth_getBlockByNumber", "params": [below, False]}])[0]["result"]
    elif fault == "backwards":
        answer["result"] = hex(max(0, int(answer["result"], 16) - 5))
    elif fault == "removed":  # the node reorganising while it answers
        answer["result"] = [dict(log, removed=True) for log in answer["result"]]
    elif fault in HOSTILE_DATA:
        answer["result"] = [dict(log, data=HOSTILE_DATA[fault](log["data"][2:]))
                            for log in answer["result"]]
    else:
        raise ValueError(f"unknown fault {fault!r} for {item['method']}")
    return answer


class StaleFork:
    """A node left on an abandoned fork: it answers as the real node did while the blocks above
    `base` up to its head then were its chain (recorded before the real node is reverted to a
    snapshot), and as the real node for the blocks at or below `base`, the history both share."""

    def __init__(self, upstream, base):
        self.upstream, self.base = upstream, base
        self.top = int(self._real("eth_blockNumber"), 16)
        self.blocks = {n: self._real("eth_getBlockByNumber", hex(n), False)
                       for n in range(base + 1, self.top + 1)}
        self.logs = self._real("eth_getLogs",
                               {"fromBlock": hex(base + 1), "toBlock": hex(self.top)})

    def _real(self, method, *params):
        answer = requests.post(self.upstream, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                    "params": list(params)}, timeout=30).json()
        return answer["result"]

    def answer(self, item):
        method, params = item["method"], item["params"]
        if method == "eth_blockNumber":
            result = hex(self.top)
        elif method == "eth_getBlockByNumber" and params[0].startswith("0x"):
            number = int(params[0], 16)
            result = (self.blocks.get(number) if number > self.base
                      else self._real(method, *params))
        elif method == "eth_getLogs":
            result = self._logs(params[0])
        else:
            result = self._real(method, *params)
        return {"jsonrpc": "2.0", "id": item["id"], "result": result}

    def _logs(self, query):
        first, last = int(query["fromBlock"], 16), min(int(query["toBlock"], 16), self.top)
        shared = (self._real("eth_getLogs", dict(query, toBlock=hex(min(last, self.base))))
                  if first <= self.base else [])
        return shared + [log for log in self.logs
                         if max(first, self.base + 1) <= int(log["blockNumber"], 16) <= last
                         and _matches(log, query)]


def _matches(log, query):
    """Whether `log` is one eth_getLogs with `query` (its address list and topics) returns."""
    addresses = query.get("address")
    if addresses is not None:
        addresses = [addresses] if isinstance(addresses, str) else addresses
        if log["address"].lower() not in {a.lower() for a in addresses}:
            return False
    for position, wanted in enumerate(query.get("topics") or []):
        if wanted is None:
            continue
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if position >= len(log["topics"]) or log["topics"][position].lower() not in {
                w.lower() for w in wanted}:
            return False
    return True


class SplittingPool(FaultyRpc):
    """A provider's balancer that spreads the calls of ONE batch over its nodes (some route and
    bill each call of a batch alone). `split(fork, blocks)`: `eth_getLogs`, and
    `eth_getBlockByNumber` of the numbers in `blocks`, are answered by `fork` (a StaleFork); every
    other call of the same batch (the chain id, the pins) by the real node. `split(None, ())`:
    honest again."""

    fork, blocks = None, ()

    def split(self, fork, blocks):
        self.fork, self.blocks = fork, set(blocks)

    def _node_for(self, item):
        params = item.get("params") or []
        if item["method"] == "eth_getLogs":
            return self.fork
        if (item["method"] == "eth_getBlockByNumber" and params
                and str(params[0]).startswith("0x") and int(params[0], 16) in self.blocks):
            return self.fork
        return self.upstream

    def answer(self, body):
        if self.fork is None:
            return super().answer(body)
        items = body if isinstance(body, list) else [body]
        answers = [_ask(self._node_for(item), [item])[0] for item in items]
        return 200, self._json(answers if isinstance(body, list) else answers[0])
