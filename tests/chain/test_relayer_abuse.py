"""The relayer against its abusers, on the real node (tests/chain/token/TestUSDC.sol, ERC-3009)
behind a proxy that can hang, trickle or lie (support/fake_rpc.py): the contract's "A relayer nobody
can drain or switch off for others" and the REQUEST_NODE_DEADLINE_SECONDS bullet of "One caller
never stalls the others".

- Refused authorizations are counted per client address (the one the shipped nginx forwards): 6
  for one process or 31 in all within 10 minutes, and that client's next ones answer 429 without
  asking the node, while another client's payer pays.
- One deadline over a request's node calls: a hung or trickling node gives a 503 naming the
  network within the deadline and a second; no error quotes a node's answer, host or URL.
- A payer that moves its money away between the check and the block, from fresh addresses, round
  after round: each revert is charged to its payer, reverts have their own cap, and an honest payer
  whose relays paid before still pays without gas."""
import itertools
import json
import logging
import socket
import threading
import time

import pytest
import requests
from support import eip3009 as signing
from support.chain_shop import XPUB, cli
from support.fake_rpc import FaultyRpc
from support.helpers import Api

from app.chain import relayer
from app.evm import rpc
from app.evm.addresses import to_checksum_address
from app.evm.eip3009 import Domain

# Hardhat's published dev account #3 (the demo's relayer too): gas coin, no token.
RELAYER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
RELAYER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
HONEST = signing.payer("an honest payer")
HONEST_CLIENT = "203.0.113.7"
ABUSER_CLIENT = "198.51.100.66"
CONFIRMATIONS = 2
GWEI = 10**9
# What a provider may echo in its errors: its project key, its own URL.
LIE = "SECRET-PROJECT-KEY refused by https://user:pw@rpc.provider.example/v3/SECRET-PROJECT-KEY"


@pytest.fixture
def app_config(tmp_path):
    path = tmp_path / "relayer.key"
    path.write_text(RELAYER_KEY[2:] + "\n")
    return {"RELAYER_KEY_FILE": str(path)}


class Relaying:
    """A merchant taking TestUSDC without gas on the test chain, its network's node `proxy` once
    `through` is called."""

    def __init__(self, app, client, runner, chain, clock, merchant):
        self.app, self.client, self.runner = app, client, runner
        self.chain, self.clock = chain, clock
        self.merchant, self.api = merchant, Api(client, merchant["secretKey"])
        clock.now = chain.timestamp()
        self.usdc = to_checksum_address(chain.deploy_token(contract="TestUSDC"))
        chain.transfer(HONEST.address, 100_000_000, token=self.usdc)
        cli(runner, "networks", "add", "hardhat", "--name", "Hardhat", "--chain-id", "31337",
            "--rpc-url", chain.url, "--confirmations", str(CONFIRMATIONS))
        cli(runner, "assets", "add", "usdc", "--network", "hardhat", "--symbol", "TUSDC",
            "--name", "USD Coin", "--contract", self.usdc, "--decimals", "6", "--eip3009")
        cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
        self.domain = Domain("Test USD Coin", "2", 31337, self.usdc)
        self.seeds = itertools.count(1)

    def headers(self, client=HONEST_CLIENT):
        return {"x-public-key": self.merchant["publicKey"], "Origin": "https://shop.example",
                "X-Forwarded-For": client}

    def through(self, node_url):
        with self.app.extensions["db"].transaction() as conn:
            conn.execute("UPDATE networks SET rpc_url = ? WHERE id = 'hardhat'", (node_url,))

    def order(self, amount):
        process_id = self.api.preorder({"amount": amount}).get_json()["processId"]
        confirmed = self.client.post(f"/payment-button/process/{process_id}/confirm",
                                     json={"assetId": "usdc", "networkId": "hardhat"},
                                     headers=self.headers())
        assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
        return process_id, confirmed.get_json()

    def body(self, process, value, signer=HONEST, **fields):
        args = dict(to=process["payment"]["address"], value=value,
                    valid_before=int(self.clock.now) + 1800)
        args.update(fields)
        return signing.body(signing.sign(signer, self.domain, **args))

    def post(self, process_id, body, client=HONEST_CLIENT):
        return self.client.post(f"/payment-button/process/{process_id}/authorization",
                                data=json.dumps(body), content_type="application/json",
                                headers=self.headers(client))

    def relayer_nonce(self):
        return int(self.chain.rpc("eth_getTransactionCount", RELAYER, "pending"), 16)

    def fresh_payer(self, amount, gas=False):
        """A new address holding `amount` of the token (and gas coin, unlocked on the node, when
        `gas`: it sends its own transactions)."""
        payer = signing.payer(f"fresh payer {next(self.seeds)}")
        self.chain.transfer(payer.address, amount, token=self.usdc)
        if gas:
            self.chain.rpc("hardhat_setBalance", payer.address, hex(10**18))
            self.chain.rpc("hardhat_impersonateAccount", payer.address)
        return payer

    def gasless(self, client=HONEST_CLIENT):
        listed = self.client.get("/payment-button/assets", headers=self.headers(client)).get_json()
        return {a["id"]: a for a in listed["data"]}["usdc"]["networks"][0]["gasless"]

    def watch(self):
        result = self.runner.invoke(args=["watch-payments", "--once"])
        assert result.exit_code == 0, result.output


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    return Relaying(app, client, runner, chain, clock, make_merchant())


def send_away(chain, payer, token, tip_gwei=50):
    """`payer` sends its whole token balance to a dev account, with a tip above the relayer's (so
    the block orders it first); straight to the node, without the test's session (a proxy's thread
    may call this while the test's thread waits)."""
    def rpc_call(method, *params):
        answer = requests.post(chain.url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                "params": list(params)}, timeout=30).json()
        assert "error" not in answer, answer
        return answer["result"]
    data = "0x70a08231" + payer.address[2:].lower().rjust(64, "0")
    balance = int(rpc_call("eth_call", {"to": token, "data": data}, "latest"), 16)
    return rpc_call("eth_sendTransaction", {
        "from": payer.address, "to": token, "gas": hex(100_000),
        "maxPriorityFeePerGas": hex(tip_gwei * GWEI),
        "maxFeePerGas": hex(10 * tip_gwei * GWEI),
        "data": "0xa9059cbb" + chain.accounts[5][2:].lower().rjust(64, "0")
                + format(balance, "064x")})


class Paused:
    """The node mines nothing while inside: what is sent waits in its pool."""

    def __init__(self, chain):
        self.chain = chain

    def __enter__(self):
        self.chain.rpc("evm_setAutomine", False)

    def __exit__(self, *exc):
        self.chain.rpc("evm_setAutomine", True)


def _no_node_words(answer, proxy_url=None):
    """The error body names no node's answer, host, port or URL."""
    text = answer.get_data(as_text=True)
    for word in ("SECRET", "provider.example", "127.0.0.1", "http", "URL-KEY"):
        assert word not in text, text
    if proxy_url is not None:
        assert proxy_url.split(":")[2].split("/")[0] not in text  # the port
    return answer.get_json()


# --- Refused authorizations, per client address ----------------------------------------------

def test_six_refusals_for_one_process_from_one_client_stop_it_without_the_node(shop, chain):
    proxy = FaultyRpc(chain.url)
    try:
        shop.through(proxy.url)
        process_id, process = shop.order(1)
        broke = signing.payer("holds none of the token")
        for _ in range(6):  # each asks the node (the balance), and is refused
            answer = shop.post(process_id, shop.body(process, 1_000_000, signer=broke),
                               ABUSER_CLIENT)
            assert (answer.status_code, list(answer.get_json()["errors"])) == (400, ["from"])
        asked, nonce = sum(proxy.calls.values()), shop.relayer_nonce()
        good = shop.body(process, 1_000_000)
        answer = shop.post(process_id, good, ABUSER_CLIENT)
        assert (answer.status_code, answer.get_json()["code"]) == (429, "rate_limited")
        assert answer.headers["Retry-After"] == "600"
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert "process" in answer.get_json()["message"]
        shop.clock.advance(10)
        answer = shop.post(process_id, good, ABUSER_CLIENT)
        assert (answer.status_code, answer.headers["Retry-After"]) == (429, "590")
        assert sum(proxy.calls.values()) == asked and shop.relayer_nonce() == nonce
        # The same client, another process: 6 is per process.
        other_id, other = shop.order(1)
        answer = shop.post(other_id, shop.body(other, 1_000_000), ABUSER_CLIENT)
        assert answer.status_code == 202, answer.get_json()
        # Another client's payer, the same process: one client's refusals stop no one else.
        answer = shop.post(process_id, good, HONEST_CLIENT)
        assert answer.status_code == 202, answer.get_json()
        assert shop.gasless(ABUSER_CLIENT) is True
    finally:
        proxy.close()


def test_31_refusals_from_one_client_stop_it_for_every_process(shop, chain):
    proxy = FaultyRpc(chain.url)
    try:
        shop.through(proxy.url)
        orders = [shop.order(1) for _ in range(8)]
        refused = 0
        for process_id, process in orders[:7]:  # 5 each: below the per-process limit
            for _ in range(5):
                if refused < 31:
                    answer = shop.post(process_id, shop.body(process, 999_999), ABUSER_CLIENT)
                    assert (answer.status_code,
                            list(answer.get_json()["errors"])) == (400, ["value"])
                    refused += 1
            shop.clock.advance(1)
        asked = sum(proxy.calls.values())
        fresh_id, fresh = orders[7]
        answer = shop.post(fresh_id, shop.body(fresh, 1_000_000), ABUSER_CLIENT)
        assert (answer.status_code, answer.get_json()["code"]) == (429, "rate_limited")
        assert answer.headers["Retry-After"] == str(600 - 7)
        assert sum(proxy.calls.values()) == asked
        answer = shop.post(fresh_id, shop.body(fresh, 1_000_000), HONEST_CLIENT)
        assert answer.status_code == 202, answer.get_json()
        # A 429 is not a refusal counted; once the window has moved on, the client is heard again.
        shop.clock.advance(600 - 7)
        answer = shop.post(orders[0][0], shop.body(orders[0][1], 999_999), ABUSER_CLIENT)
        assert answer.status_code == 400, answer.get_json()
    finally:
        proxy.close()


def test_requests_at_once_are_counted_one_after_the_other(shop, app):
    """Twelve refused authorizations of one process from one client at the same moment, on
    several threads (as on several workers): six are checked and refused, six answer 429."""
    process_id, process = shop.order(1)
    bodies = [shop.body(process, 999_999) for _ in range(12)]
    start, answers = threading.Barrier(12), []

    def post(body):
        client = app.test_client()
        start.wait()
        answers.append(client.post(f"/payment-button/process/{process_id}/authorization",
                                   data=json.dumps(body), content_type="application/json",
                                   headers=shop.headers(ABUSER_CLIENT)).status_code)
    threads = [threading.Thread(target=post, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [400] * 6 + [429] * 6


def test_what_is_kept_about_refusals_stays_bounded(shop, monkeypatch):
    """Many client addresses (an attacker's IPv6 range): the rows kept never pass the cap by more
    than one, and the refusals older than the window go."""
    monkeypatch.setattr(relayer, "RELAY_REFUSALS_MAX", 20)
    process_id, process = shop.order(1)
    body = shop.body(process, 999_999)
    db = shop.app.extensions["db"]
    for n in range(60):
        assert shop.post(process_id, body, f"2001:db8::{n:x}").status_code == 400
        with db.transaction() as conn:
            assert conn.execute("SELECT count(*) FROM relay_refusals").fetchone()[0] <= 21
    shop.clock.advance(601)
    assert shop.post(process_id, body, "2001:db8::ffff").status_code == 400
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) FROM relay_refusals").fetchone()[0] == 1


# --- One deadline; no node's words ---------------------------------------------------------

def test_a_hung_node_answers_503_within_the_deadline_naming_the_network(shop, chain, app):
    app.config["REQUEST_NODE_DEADLINE_SECONDS"] = 1.0
    proxy = FaultyRpc(chain.url, path="/v3/URL-KEY-0001")
    try:
        shop.through(proxy.url)
        process_id, process = shop.order(1)
        body = shop.body(process, 1_000_000)
        proxy.latency = 8  # every request: no answer for 8 s (the read timeout is 20 s)
        started = time.monotonic()
        answer = shop.post(process_id, body)
        elapsed = time.monotonic() - started
        assert (answer.status_code, answer.get_json()["code"]) == (503, "network_unavailable")
        assert elapsed < 1.0 + 1, elapsed
        assert answer.headers["Retry-After"] == "5"
        assert "network hardhat" in _no_node_words(answer, proxy.url)["message"]
        # The listing asks the node for the relayer's gas: within the deadline too, the option
        # hidden.
        started = time.monotonic()
        assert shop.gasless() is False
        assert time.monotonic() - started < 1.0 + 1
        proxy.latency = 0
        answer = shop.post(process_id, body)
        assert answer.status_code == 202, answer.get_json()
    finally:
        proxy.close()


class Trickling:
    """A node that answers every request byte by byte, one every `pause` seconds: each read gets
    a byte well within any read timeout, so only a deadline over the whole call ends it."""

    def __init__(self, pause=0.2, lasting=20):
        self.pause, self.lasting = pause, lasting
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/v3/URL-KEY-0002"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        body = b'{"jsonrpc": "2.0", "id": 1, "result": "0x7a69"}' + b" " * 200
        reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
        until = time.monotonic() + self.lasting
        try:
            conn.recv(65536)
            for byte in reply:
                if self.stop.is_set() or time.monotonic() > until:
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.pause)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.server.close()


def test_a_trickling_node_is_bounded_by_the_deadline_not_the_read_timeout(shop, app):
    node = Trickling()
    try:
        app.config["REQUEST_NODE_DEADLINE_SECONDS"] = 1.0
        shop.through(node.url)
        process_id, process = shop.order(1)
        started = time.monotonic()
        answer = shop.post(process_id, shop.body(process, 1_000_000))
        assert time.monotonic() - started < 1.0 + 1
        assert (answer.status_code, answer.get_json()["code"]) == (503, "network_unavailable")
        assert "network hardhat" in _no_node_words(answer, node.url)["message"]

        client = rpc.Client(node.url, timeout=(5, 20), deadline=rpc.deadline_in(1.0))
        started = time.monotonic()
        with pytest.raises(rpc.DeadlinePassed) as raised:
            client.chain_id()
        assert time.monotonic() - started < 1.5
        assert "URL-KEY" not in str(raised.value) and raised.value.asked
        with pytest.raises(rpc.DeadlinePassed) as raised:  # past it, nothing more is asked
            client.chain_id()
        assert not raised.value.asked
    finally:
        node.close()


class LyingNode(FaultyRpc):
    """A provider's URL whose errors quote its project key and its URL: the calls of the methods
    in `errors` are answered with a JSON-RPC error of that text (never passed on); the others by
    the real node."""

    def __init__(self, upstream):
        super().__init__(upstream, path="/v3/URL-KEY-0003")
        self.errors = {}

    def answer(self, body):
        items = body if isinstance(body, list) else [body]
        lying = [item for item in items if item["method"] in self.errors]
        if not lying:
            return super().answer(body)
        answers = {}
        honest = [item for item in items if item["method"] not in self.errors]
        if honest:
            for answer in json.loads(super().answer(honest)[1]):
                answers[answer["id"]] = answer
        for item in lying:
            self.calls[item["method"]] += 1
            answers[item["id"]] = {"jsonrpc": "2.0", "id": item["id"], "error": {
                "code": -32000, "message": self.errors[item["method"]]}}
        ordered = [answers[item["id"]] for item in items]
        return 200, self._json(ordered if isinstance(body, list) else ordered[0])


@pytest.mark.parametrize("method, status, code", [
    ("eth_chainId", 503, "network_unavailable"),
    ("eth_call", 503, "network_unavailable"),  # authorizationState and balanceOf
    ("eth_estimateGas", 409, "payment_method_unavailable"),  # taken as a revert: nothing sent
    ("eth_sendRawTransaction", 503, "network_unavailable"),  # refused: nothing went out
    ("down", 503, "network_unavailable"),  # unreachable
])
def test_no_error_quotes_the_node(shop, chain, caplog, method, status, code):
    node = LyingNode(chain.url)
    try:
        shop.through(node.url)
        process_id, process = shop.order(1)
        if method == "down":
            node.down()
        else:
            node.errors[method] = LIE
        nonce = shop.relayer_nonce()
        with caplog.at_level(logging.INFO, logger="app.chain.relayer"):
            answer = shop.post(process_id, shop.body(process, 1_000_000))
        assert (answer.status_code, answer.get_json()["code"]) == (status, code), answer.get_json()
        message = _no_node_words(answer, node.url)["message"]
        if status == 503:
            assert "network hardhat" in message and answer.headers["Retry-After"] == "5"
        assert shop.relayer_nonce() == nonce
        logged = caplog.text
        assert "URL-KEY" not in logged  # the URL's path never logged ...
        if method != "down":
            # ... the node's answer is, for the operator
            assert "SECRET-PROJECT-KEY refused" in logged
        assert f"http://127.0.0.1:{node.url.split(':')[2].split('/')[0]}" in logged
    finally:
        node.close()


# --- Simulated right before it is sent; reverts charged to their payers ----------------------

def test_the_call_is_simulated_again_right_before_it_is_sent(shop, chain):
    """The payer's transfer of its whole balance reaches the node's pool after the checks passed
    (here: as the relayer takes its turn): simulated once more on the pending state right before
    broadcasting, the authorization is refused and nothing is sent; the relay was never sent, so
    the payer is not charged and its process may be paid again."""
    proxy = FaultyRpc(chain.url)
    try:
        shop.through(proxy.url)
        payer = shop.fresh_payer(5_000_000, gas=True)
        process_id, process = shop.order(5)
        nonce = shop.relayer_nonce()
        with Paused(chain):
            proxy.before("eth_getTransactionCount", 0, lambda: send_away(chain, payer, shop.usdc))
            answer = shop.post(process_id, shop.body(process, 5_000_000, signer=payer))
            assert (answer.status_code, answer.get_json()["code"]) == (
                409, "payment_method_unavailable"), answer.get_json()
            assert "would refuse this authorization" in answer.get_json()["message"]
            assert shop.relayer_nonce() == nonce
        chain.mine(1)
        assert shop.relayer_nonce() == nonce
        answer = shop.post(process_id, shop.body(process, 5_000_000))  # another payer pays it
        assert answer.status_code == 202, answer.get_json()
    finally:
        chain.rpc("hardhat_stopImpersonatingAccount", payer.address)
        proxy.close()


def test_payers_moving_their_money_away_cannot_switch_the_relayer_off(shop, chain, app):
    """Round after round, a fresh address signs for a fresh process, passes every check, and
    sends its balance away in the same block with a higher tip: the relay reverts (about 8e13 wei
    of the operator's gas each). Each revert is charged to its payer (refused for a day); past
    RELAYER_MAX_REVERTS_PER_HOUR new payers are refused, nothing more is sent; reverted relays do
    not count against RELAYER_MAX_PER_HOUR; so an honest payer whose relays paid before still pays
    without gas, and is credited."""
    app.config.update(RELAYER_MAX_PER_HOUR=4, RELAYER_MAX_REVERTS_PER_HOUR=3)
    first_id, first = shop.order(2)
    answer = shop.post(first_id, shop.body(first, 2_000_000))
    assert answer.status_code == 202, answer.get_json()
    chain.mine(CONFIRMATIONS)

    abusers, reverted = [], []
    for _ in range(5):
        abuser = shop.fresh_payer(3_000_000, gas=True)
        abusers.append(abuser)
        process_id, process = shop.order(3)
        nonce = shop.relayer_nonce()
        with Paused(chain):
            answer = shop.post(process_id, shop.body(process, 3_000_000, signer=abuser),
                               f"192.0.2.{len(abusers)}")
            if answer.status_code == 202:
                send_away(chain, abuser, shop.usdc)
                chain.mine(1)
                receipt = chain.rpc("eth_getTransactionReceipt", answer.get_json()["txHash"])
                assert receipt["status"] == "0x0"  # reverted: the tokens left first
                reverted.append(answer.get_json()["txHash"])
            else:
                assert (answer.status_code, answer.get_json()["code"]) == (
                    409, "payment_method_unavailable"), answer.get_json()
                assert "no new payers" in answer.get_json()["message"]
                assert shop.relayer_nonce() == nonce
        chain.rpc("hardhat_stopImpersonatingAccount", abuser.address)
    assert len(reverted) == 3  # then the revert cap: nothing more sent for new payers

    # A payer whose relay reverted is refused for a day, with enough money or not.
    chain.transfer(abusers[0].address, 3_000_000, token=shop.usdc)
    again_id, again = shop.order(3)
    answer = shop.post(again_id, shop.body(again, 3_000_000, signer=abusers[0]), "192.0.2.99")
    assert (answer.status_code, answer.get_json()["code"]) == (409, "payment_method_unavailable")
    assert "failed on chain" in answer.get_json()["message"]

    # The honest payer, whose relay paid before, pays without gas, and is credited.
    assert shop.gasless() is True
    process_id, process = shop.order(4)
    answer = shop.post(process_id, shop.body(process, 4_000_000))
    assert answer.status_code == 202, answer.get_json()
    chain.mine(CONFIRMATIONS)
    shop.watch()
    paid = shop.api.get(process_id).get_json()
    assert paid["status"] == "completed"
    assert [t["txHash"] for t in paid["payment"]["transfers"]] == [answer.get_json()["txHash"]]
    assert shop.api.get(first_id).get_json()["status"] == "completed"

    # A new payer waits until the reverts are an hour old; the abuser, a day.
    newcomer = shop.fresh_payer(1_000_000)
    late_id, late = shop.order(1)
    answer = shop.post(late_id, shop.body(late, 1_000_000, signer=newcomer))
    assert "no new payers" in answer.get_json()["message"]
    shop.clock.advance(3601)
    late_id, late = shop.order(1)
    answer = shop.post(late_id, shop.body(late, 1_000_000, signer=newcomer))
    assert answer.status_code == 202, answer.get_json()
    again_id, again = shop.order(3)
    answer = shop.post(again_id, shop.body(again, 3_000_000, signer=abusers[0]), "192.0.2.99")
    assert "failed on chain" in answer.get_json()["message"]
