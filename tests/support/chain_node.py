"""A real EVM node for the chain tests: Hardhat 2's `hardhat node` on a loopback port, with the
6-decimal ERC-20 token of tests/chain/token deployed (its committed build; tests/chain/compile.js).
Chain id 31337 (a test network); the tests that need a live network, or another chain behind one
URL, also start a node answering for chain id 137 (`live_chain_node`), once per session.

The node starts once per test session; the `chain` fixture takes an `evm_snapshot` before each test
and reverts to it after, so tests do not see each other's blocks. Node and the npm packages are
installed by `make test` (`npm ci` in tests/chain); without them the fixture FAILS, saying how to
fix it (a chain test must never be skipped silently).
"""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from support.fake_rpc import FaultyRpc
from support.servers import free_port

CHAIN_DIR = Path(__file__).resolve().parent.parent / "chain"
SUPPLY = 10**15  # base units: a billion tokens of 6 decimals, held by the first dev account
TRANSFER_SELECTOR = "a9059cbb"  # transfer(address,uint256)


class Chain:
    """The node as tests drive it: JSON-RPC calls, blocks, token transfers from dev accounts."""

    def __init__(self, url):
        self.url = url
        self.session = requests.Session()
        self.accounts = []
        self.token = None  # the token contract, lowercase

    def rpc(self, method, *params):
        body = self.session.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                 "params": list(params)}, timeout=30).json()
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body["result"]

    def head(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def block(self, number="latest"):
        tag = hex(number) if isinstance(number, int) else number
        return self.rpc("eth_getBlockByNumber", tag, False)

    def timestamp(self, number="latest") -> int:
        return int(self.block(number)["timestamp"], 16)

    def mine(self, blocks=1):
        """`blocks` new empty blocks, one by one: hardhat_mine's several blocks at once may carry a
        zero parent hash after an evm_revert, and block hashes are checked to link."""
        for _ in range(blocks):
            self.rpc("evm_mine")

    def next_timestamp(self, ts):
        """The next block's timestamp (the following blocks count on from it)."""
        self.rpc("evm_setNextBlockTimestamp", hex(ts))

    def snapshot(self) -> str:
        return self.rpc("evm_snapshot")

    def revert(self, snapshot_id):
        assert self.rpc("evm_revert", snapshot_id) is True

    def send(self, sender, to, data="0x", value=0):
        """A transaction from an unlocked dev account, mined at once; its receipt."""
        tx_hash = self.rpc("eth_sendTransaction", {"from": sender, "to": to, "data": data,
                                                   "value": hex(value)})
        receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
        assert receipt is not None and receipt["status"] == "0x1", receipt
        return receipt

    def transfer(self, to, amount, *, sender=0, token=None):
        """An ERC-20 transfer of `amount` base units to `to`; returns (tx hash, block number)."""
        data = "0x" + TRANSFER_SELECTOR + to[2:].lower().rjust(64, "0") + format(amount, "064x")
        receipt = self.send(self.accounts[sender], token or self.token, data)
        return receipt["transactionHash"], int(receipt["blockNumber"], 16)

    def deploy_token(self, supply=SUPPLY, contract="TestUSD") -> str:
        """Deploy another TestUSD (e.g. a token the payment is not in), or another of the test
        tokens of tests/chain/token taking the supply (TestUSDC: ERC-3009); its address,
        lowercase."""
        build = json.loads((CHAIN_DIR / "token" / f"{contract}.json").read_text())
        data = build["bytecode"] + format(supply, "064x")
        tx_hash = self.rpc("eth_sendTransaction", {"from": self.accounts[0], "data": data})
        receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
        return receipt["contractAddress"].lower()

    def deploy_named_token(self, name, symbol, decimals, supply=SUPPLY) -> str:
        """Deploy a TestToken (tests/chain/token/TestToken.sol) of this name, symbol and decimals,
        the supply to the first dev account; its address, lowercase."""
        from eth_abi import encode
        build = json.loads((CHAIN_DIR / "token" / "TestToken.json").read_text())
        data = build["bytecode"] + encode(["string", "string", "uint8", "uint256"],
                                          [name, symbol, decimals, supply]).hex()
        tx_hash = self.rpc("eth_sendTransaction", {"from": self.accounts[0], "data": data})
        receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
        return receipt["contractAddress"].lower()

    def deploy_feed(self, decimals, description, answer) -> str:
        """Deploy a TestPriceFeed (tests/chain/token/TestPriceFeed.sol, a Chainlink-style feed, also
        a sequencer uptime feed) answering `answer` in round 1, now; its address, lowercase."""
        from eth_abi import encode
        build = json.loads((CHAIN_DIR / "token" / "TestPriceFeed.json").read_text())
        data = build["bytecode"] + encode(["uint8", "string", "int256"],
                                          [decimals, description, answer]).hex()
        tx_hash = self.rpc("eth_sendTransaction", {"from": self.accounts[0], "data": data})
        receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
        return receipt["contractAddress"].lower()

    def set_feed(self, feed, answer, *, updated_at=None, started_at=None, round_id=None,
                 answered_in_round=None):
        """A new latest round of a TestPriceFeed: with only `answer`, the next round, now
        (setAnswer); else setRound, the missing values filled in: round_id the latest + 1,
        updated_at the latest block's timestamp, started_at = updated_at, answered_in_round =
        round_id. The receipt."""
        from eth_abi import encode
        if updated_at is started_at is round_id is answered_in_round is None:
            data = selector("setAnswer(int256)") + encode(["int256"], [answer]).hex()
        else:
            round_id = self.read_feed(feed)[0] + 1 if round_id is None else round_id
            updated_at = self.timestamp() if updated_at is None else updated_at
            started_at = updated_at if started_at is None else started_at
            answered_in_round = round_id if answered_in_round is None else answered_in_round
            data = selector("setRound(uint80,int256,uint256,uint256,uint80)") + encode(
                ["uint80", "int256", "uint256", "uint256", "uint80"],
                [round_id, answer, started_at, updated_at, answered_in_round]).hex()
        return self.send(self.accounts[0], feed, data)

    def read_feed(self, feed, round_id=None) -> tuple:
        """latestRoundData() of a feed (or getRoundData(round_id)), by eth_call: (roundId, answer,
        startedAt, updatedAt, answeredInRound). A revert raises RuntimeError."""
        from eth_abi import decode, encode
        if round_id is None:
            data = selector("latestRoundData()")
        else:
            data = selector("getRoundData(uint80)") + encode(["uint80"], [round_id]).hex()
        result = self.rpc("eth_call", {"to": feed, "data": data}, "latest")
        return decode(["uint80", "int256", "uint256", "uint256", "uint80"],
                      bytes.fromhex(result[2:]))


def selector(signature) -> str:
    """0x and the 4-byte function selector of `signature`, hex."""
    from eth_utils import keccak
    return "0x" + keccak(text=signature)[:4].hex()


def _missing(what):
    pytest.fail(
        f"The chain tests need {what}. Install Node.js 18+ (Debian: apt-get install nodejs npm)"
        " and run `make test` (it runs `npm ci` in tests/chain), or `cd tests/chain && npm ci`.",
        pytrace=False,
    )


def _node_env(chain_id):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}
    env.update(HARDHAT_DISABLE_TELEMETRY_PROMPT="true", CI="true", NO_COLOR="1",
               TEST_CHAIN_ID=str(chain_id))
    return env


def _start_node(tmp_path_factory, chain_id):
    """A node answering for `chain_id`, with the token deployed (at the same address on every node:
    the first transaction of the same dev account); yields its Chain, then stops it."""
    node = shutil.which("node")
    if node is None:
        _missing("Node.js (`node` is not on PATH)")
    cli = CHAIN_DIR / "node_modules" / "hardhat" / "internal" / "cli" / "cli.js"
    if not cli.exists():
        _missing("the npm packages of tests/chain (node_modules is missing)")
    log_path = tmp_path_factory.mktemp("chain") / "hardhat.log"
    for _ in range(3):  # another process may take the free port before the node binds it
        port = free_port()
        log = open(log_path, "w")
        proc = subprocess.Popen([node, str(cli), "node", "--hostname", "127.0.0.1", "--port",
                                 str(port)], cwd=CHAIN_DIR, env=_node_env(chain_id), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        chain = Chain(f"http://127.0.0.1:{port}/")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                chain.head()
                break
            except (requests.RequestException, ValueError):
                time.sleep(0.1)
        if proc.poll() is None and time.monotonic() < deadline:
            break
        proc.kill()
        proc.wait()
        log.close()
    else:
        pytest.fail(f"hardhat node did not start:\n{log_path.read_text()[-3000:]}", pytrace=False)
    try:
        assert int(chain.rpc("eth_chainId"), 16) == chain_id
        chain.accounts = chain.rpc("eth_accounts")
        chain.token = chain.deploy_token()
        yield chain
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def chain_node(tmp_path_factory):
    """The test chain (31337, Hardhat's own id: a test network)."""
    yield from _start_node(tmp_path_factory, 31337)


@pytest.fixture(scope="session")
def live_chain_node(tmp_path_factory):
    """A second node, answering for chain id 137 (Polygon PoS's): it stands in for a live network,
    and for another chain behind a network's URL. Started only by the tests that ask for it."""
    yield from _start_node(tmp_path_factory, 137)


@pytest.fixture(scope="session")
def second_test_chain_node(tmp_path_factory):
    """A third node, answering for chain id 80002 (Polygon Amoy's, a well-known test chain): a
    second test network where a test needs two (the button's network choice)."""
    yield from _start_node(tmp_path_factory, 80002)


def _reverted(node):
    """The node for one test, reverted after it to the state it had before it."""
    snapshot = node.snapshot()
    yield node
    node.revert(snapshot)


@pytest.fixture
def chain(chain_node):
    """The node, reverted after the test to the state it had before it."""
    yield from _reverted(chain_node)


@pytest.fixture
def live_chain(live_chain_node):
    """The chain-137 node, reverted after the test like `chain`."""
    yield from _reverted(live_chain_node)


@pytest.fixture
def amoy(second_test_chain_node):
    """The chain-80002 node, reverted after the test like `chain`."""
    yield from _reverted(second_test_chain_node)


@pytest.fixture
def proxy(chain):
    """One URL in front of `chain`'s node that can lie, fail or forward elsewhere
    (support/fake_rpc.py); `proxy.upstream` says which node answers."""
    proxy = FaultyRpc(chain.url)
    yield proxy
    proxy.close()
