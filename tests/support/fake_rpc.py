"""A JSON-RPC endpoint on loopback in front of the real test node that misbehaves on demand: down
(`down()`: its port refuses connections until `up()`), hanging or slow calls, HTTP errors, JSON-RPC
errors, malformed JSON, a head going backwards, "result too large" for wide eth_getLogs ranges,
logs marked `removed`, and some methods answered by another node (a pool's node of another chain
or fork). Every call it does not spoil goes to the real node unchanged."""
import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


class FaultyRpc:
    def __init__(self, upstream, path="/v3/SECRET-PROJECT-KEY"):
        self.upstream = upstream
        self.queued = defaultdict(list)  # method -> faults for its next calls, in order
        self.max_log_range = None  # eth_getLogs over more blocks than this: "too many results"
        self.too_large_status = 200  # the HTTP status of that refusal (some providers send 400/413)
        self.calls = Counter()
        self.lock = threading.Lock()
        self.slow_started = threading.Event()  # set when a "slow" call arrives
        self.hooks = {}  # method -> [calls to let through first, function run before the next]
        self.elsewhere = None  # (upstream, methods): calls of only these methods go there
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
        with self.lock:
            self.queued[method].extend(faults)

    def before(self, method, after, function):
        """Run `function` (e.g. a reorganisation of the node) before passing on the single call of
        `method` that follows the next `after` ones."""
        with self.lock:
            self.hooks[method] = [after, function]

    def answer_from(self, upstream, *methods):
        """Calls (single, or batches) of only `methods` go to `upstream` from now on (another node
        behind the same URL); `answer_from(None)` ends it."""
        with self.lock:
            self.elsewhere = None if upstream is None else (upstream, set(methods))

    def _upstream(self, methods):
        if self.elsewhere is not None and set(methods) <= self.elsewhere[1]:
            return self.elsewhere[0]
        return self.upstream

    def answer(self, body):
        if isinstance(body, list):  # a batch: counted per call, passed through unspoiled
            with self.lock:
                self.calls.update(item["method"] for item in body)
                upstream = self._upstream(item["method"] for item in body)
            return 200, self._json(requests.post(upstream, json=body, timeout=30).json())
        method = body["method"]
        with self.lock:
            self.calls[method] += 1
            fault = self.queued[method].pop(0) if self.queued[method] else None
            hook = self.hooks.get(method)
            if hook is not None and hook[0] == 0:
                del self.hooks[method]
                hook = hook[1]
            else:
                if hook is not None:
                    hook[0] -= 1
                hook = None
        if hook is not None:
            hook()
        if fault == "hang":
            time.sleep(3)
        elif fault == "slow":  # answered, after two seconds
            self.slow_started.set()
            time.sleep(2)
        elif fault == "http500":
            return 500, b"<html>Internal Server Error</html>"
        elif fault == "http400":  # a JSON-RPC error on an HTTP error status, as some providers send
            return 400, self._json({"jsonrpc": "2.0", "id": body["id"],
                                    "error": {"code": -32602, "message": "invalid params"}})
        elif fault == "malformed":
            return 200, b'{"jsonrpc": "2.0", "id": 1, "result": '
        elif fault == "error":
            return 200, self._json({"jsonrpc": "2.0", "id": body["id"],
                                    "error": {"code": -32000, "message": "header not found"}})
        elif fault == "garbage-result":
            return 200, self._json({"jsonrpc": "2.0", "id": body["id"], "result": {"oops": 1}})
        if method == "eth_getLogs" and self.max_log_range is not None:
            query = body["params"][0]
            if int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1 > self.max_log_range:
                return self.too_large_status, self._json({
                    "jsonrpc": "2.0", "id": body["id"], "error": {
                        "code": -32005, "message": "query returned more than 10000 results"}})
        with self.lock:
            upstream = self._upstream([method])
        answer = requests.post(upstream, json=body, timeout=30).json()
        if fault == "backwards":
            answer["result"] = hex(max(0, int(answer["result"], 16) - 5))
        elif fault == "removed":  # every log of the answer marked as left by a reorganisation
            answer["result"] = [dict(entry, removed=True) for entry in answer["result"]]
        return 200, self._json(answer)

    @staticmethod
    def _json(value):
        return json.dumps(value).encode()

    def close(self):
        if self.listening:
            self.down()
