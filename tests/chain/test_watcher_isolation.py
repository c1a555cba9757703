"""The watcher polls each network on its own (../shared/API.md, "One caller never stalls the
others"): a node that answers slowly, or holds a request, delays only its own network. Two real
nodes: the chain-80002 one behind the proxy of tests/support/fake_rpc.py, answering every request
3 s late and holding one until the test releases it, and the chain-31337 one, healthy; one watcher
for both. In a loop and in one `--once` pass, the healthy network's payment is credited while the
slow node still holds the other network's request (a read timeout longer than the test: in flight
for the watcher too); networks added and disabled while the loop runs are picked up.

No timed assertion: the order of what happens is asserted (credited while the slow request is
held), which a loaded machine cannot turn around."""
import threading
import time

import pytest
from support.chain_shop import NETWORK, add_network, cli, open_shop
from support.fake_rpc import FaultyRpc

from app.chain.watcher import Watcher

CONFIRMATIONS = 2
UNIT = 10**6
SLOW = "amoy"  # the slow network, on the chain-80002 node behind the proxy
POLL_INTERVAL = 1
HELD_SECONDS = 90  # the longest a held request waits for its release


@pytest.fixture
def app_config():
    """A read timeout longer than any wait of these tests: a held request stays in flight for the
    watcher too, as a node answering just under its timeout would."""
    return {"CHAIN_RPC_READ_TIMEOUT_SECONDS": HELD_SECONDS + 30}


class Held:
    """Holds the next request of the slow node that carries `method` until released (a node that
    does not answer), as a hook of the proxy: `arrived` when the request is held, `answered` once it
    went on to the node."""

    def __init__(self, proxy, method="eth_chainId"):
        self.arrived, self.released, self.answered = (threading.Event() for _ in range(3))
        proxy.before(method, 0, self._hold)

    def _hold(self):
        self.arrived.set()
        self.released.wait(HELD_SECONDS)
        self.answered.set()

    def release(self):
        self.released.set()


@pytest.fixture
def slow_proxy(amoy):
    """The proxy in front of the chain-80002 node: the slow network's URL."""
    proxy = FaultyRpc(amoy.url)
    yield proxy
    proxy.close()


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    """The healthy network (chain 31337, its node reached directly)."""
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS)


def add_slow(runner, amoy, slow_proxy):
    """The other network (chain 80002), behind the proxy. Its id sorts first: a watcher polling
    the networks one after another asks its node first."""
    add_network(runner, amoy, confirmations=CONFIRMATIONS, rpc_url=slow_proxy.url, network=SLOW,
                name="Amoy", chain_id=80002)


@pytest.fixture
def both(shop, runner, amoy, slow_proxy):
    """Both networks; every request of the slow one's node answered 3 s late."""
    add_slow(runner, amoy, slow_proxy)
    slow_proxy.latency = 3.0
    return shop


def _wait_for(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class Loop:
    """`Watcher.run` in a thread of the test, stopped as SIGTERM stops it (`stop()`)."""

    def __init__(self, app):
        self.watcher = Watcher.from_app(app, poll_interval=POLL_INTERVAL, backoff_max=2)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)
        self.thread.start()

    def stop(self):
        self.watcher.stop()
        self.thread.join(60)
        self.watcher.close()
        assert not self.thread.is_alive(), "the loop did not stop"


def test_a_slow_node_holds_back_only_its_own_network(both, app, chain, amoy, slow_proxy):
    """The loop: while the slow node holds the first request of its network's poll, the healthy
    network is polled on and its payment credited; released, the slow network's payment counts
    too, and the healthy one goes on being polled."""
    shop = both
    slow_id, slow_address = shop.order(5, network=SLOW)
    held = Held(slow_proxy)
    loop = Loop(app)
    try:
        _wait_for(held.arrived.is_set, "the slow node's first request")
        # Paid on the healthy network while the slow node holds the other network's poll.
        paid_id, paid_address = shop.order(5)
        chain.transfer(paid_address, 5 * UNIT)
        chain.mine(CONFIRMATIONS - 1)
        _wait_for(lambda: shop.event_types(paid_id)[-1:] == ["payment.completed"],
                  "the healthy network's payment credited", timeout=30)
        assert not held.answered.is_set()  # the slow request was in flight all along
        # The slow network still polls: once its node answers (3 s a request), its payment counts.
        amoy.transfer(slow_address, 5 * UNIT)
        amoy.mine(CONFIRMATIONS - 1)
        requests = slow_proxy.requests
        held.release()
        _wait_for(lambda: shop.event_types(slow_id)[-1:] == ["payment.completed"],
                  "the slow network's payment credited", timeout=90)
        assert slow_proxy.requests > requests
        # Meanwhile the healthy network was polled on, every interval.
        again_id, again_address = shop.order(3)
        chain.transfer(again_address, 3 * UNIT)
        chain.mine(CONFIRMATIONS - 1)
        _wait_for(lambda: shop.event_types(again_id)[-1:] == ["payment.completed"],
                  "the healthy network's second payment", timeout=30)
    finally:
        held.release()
        loop.stop()


def test_one_pass_polls_the_networks_at_once_and_fails_when_one_failed(both, app, chain,
                                                                       slow_proxy):
    """`--once` (cron): every network polled in the same pass, each on its own; the healthy one's
    payment is credited while the slow node holds the other's request; the pass fails when one
    network's poll failed, and the other network's credit stands."""
    shop = both
    paid_id, paid_address = shop.order(5)
    chain.transfer(paid_address, 5 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    held = Held(slow_proxy)
    slow_proxy.fail("eth_getBlockByNumber:latest", "http500")  # the held request then fails
    watcher = Watcher.from_app(app, poll_interval=POLL_INTERVAL)
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(watcher.run_once()), daemon=True)
    thread.start()
    try:
        _wait_for(held.arrived.is_set, "the slow node's request")
        _wait_for(lambda: shop.event_types(paid_id) == ["payment.completed"],
                  "the healthy network's payment credited", timeout=30)
        assert not held.answered.is_set() and thread.is_alive()
    finally:
        held.release()
        thread.join(60)
        watcher.close()
    assert outcome == [False]
    assert shop.event_types(paid_id) == ["payment.completed"]


def test_networks_added_and_disabled_while_the_loop_runs_are_picked_up(shop, app, amoy,
                                                                        slow_proxy, runner):
    """A network added while the loop runs gets its own poller, and its payment counts; one
    disabled is no longer polled (its poller ends after its poll)."""
    loop = Loop(app)
    try:
        _wait_for(lambda: pollers() == [f"watch {NETWORK}"], "the first network's poller")
        add_slow(runner, amoy, slow_proxy)
        paid_id, paid_address = shop.order(5, network=SLOW)
        amoy.transfer(paid_address, 5 * UNIT)
        amoy.mine(CONFIRMATIONS - 1)
        _wait_for(lambda: shop.event_types(paid_id)[-1:] == ["payment.completed"],
                  "the added network polled")
        assert pollers() == [f"watch {SLOW}", f"watch {NETWORK}"]
        cli(runner, "networks", "disable", SLOW)
        _wait_for(lambda: pollers() == [f"watch {NETWORK}"], "the disabled network's poller ended")
        requests = slow_proxy.requests
        time.sleep(3 * POLL_INTERVAL)
        assert slow_proxy.requests == requests  # the disabled network is polled no more
    finally:
        loop.stop()
    assert pollers() == []


def pollers():
    """The names of the watcher's network threads alive, sorted."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("watch "))
