"""The chain watcher when its JSON-RPC endpoint misbehaves (tests/support/fake_rpc.py, in front of
the real node): each fault ends the pass for that network with nothing miscounted and no URL path in
the logs, the next pass catches up; too-large log queries are split; several watchers at once count
each transfer once; the loop survives faults with backoff and exits 0 on SIGTERM."""
import logging
import signal
import subprocess
import time

import pytest
from support.chain_shop import open_shop
from support.servers import BIN, ROOT, service_env

CONFIRMATIONS = 2
UNIT = 10**6
SECRET = "SECRET-PROJECT-KEY"


@pytest.fixture
def app_config():
    return {"CHAIN_RPC_READ_TIMEOUT_SECONDS": 0.5, "PROCESS_TTL_SECONDS": 30 * 86400}


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant, proxy):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS, rpc_url=proxy.url)


@pytest.mark.parametrize("method, fault, message", [
    # the head is read as its block, in one batch with the chain id and the kept block
    ("eth_getBlockByNumber:latest", "hang",
     'eth_getBlockByNumber("latest"): http://127.0.0.1:{port} unreachable (ReadTimeout)'),
    ("eth_getBlockByNumber:latest", "http500",
     'eth_getBlockByNumber("latest"): http://127.0.0.1:{port} answered HTTP 500'),
    ("eth_getBlockByNumber:latest", "backwards", "reports head"),
    ("eth_getLogs", "http400",
     "eth_getLogs (HTTP 400): http://127.0.0.1:{port} error -32602: invalid params"),
    ("eth_getLogs", "malformed", "eth_getLogs: http://127.0.0.1:{port} answered malformed JSON"),
    ("eth_getLogs", "error", "eth_getLogs: http://127.0.0.1:{port} error -32000: header not found"),
    ("eth_getLogs", "garbage-result", "eth_getLogs: the result is not a list"),
    ("eth_getBlockByNumber", "garbage-result", "eth_getBlockByNumber.number: not a hex quantity"),
])
def test_a_fault_ends_the_pass_and_nothing_is_miscounted(shop, chain, proxy, caplog, method,
                                                         fault, message):
    process_id, address = shop.order(4)
    chain.transfer(address, 4 * UNIT)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    chain.mine(CONFIRMATIONS)

    proxy.fail(method, fault)
    caplog.clear()
    shop.watch(exit_code=1)
    port = proxy.server.server_address[1]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and message.format(port=port) in warnings[0], warnings
    assert SECRET not in caplog.text
    assert shop.event_types(process_id) == ["payment.pending"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["seen"]

    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]


@pytest.mark.parametrize("status", [200, 400, 413])
def test_a_range_the_node_finds_too_large_is_split(shop, chain, proxy, status):
    """Refused with a JSON-RPC error on HTTP 200, or on 400/413 as some providers do."""
    orders = [shop.order(2) for _ in range(3)]
    for _, address in orders:
        chain.mine(5)
        chain.transfer(address, 2 * UNIT)
    chain.mine(CONFIRMATIONS)
    proxy.max_log_range = 4
    proxy.too_large_status = status
    shop.watch()
    for process_id, _ in orders:
        assert shop.event_types(process_id) == ["payment.completed"]
    assert proxy.calls["eth_getLogs"] >= 7  # 20 blocks, refused above 4: split down to ranges of 3


def _watcher(database, *args, read_timeout=0.5):
    """The watcher's CLI in a process of its own; a short read timeout by default, so that the
    "hang" fault ends a call quickly."""
    env = service_env(database, FLASK_CHAIN_RPC_READ_TIMEOUT_SECONDS=str(read_timeout))
    return subprocess.Popen([str(BIN / "flask"), "--app", "app", "watch-payments", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_several_watchers_at_once_count_each_transfer_once(shop, chain, app):
    orders = [shop.order(1) for _ in range(12)]
    for _, address in orders:
        chain.transfer(address, UNIT // 2)
        chain.transfer(address, UNIT // 2)
    chain.mine(CONFIRMATIONS)
    database = app.config["DATABASE"]
    # The default read timeout: under CPU load the node may take over half a second to answer three
    # watchers at once, and a timed-out call ends the --once pass with exit status 1.
    runs = [_watcher(database, "--once", "--max-range", "3", read_timeout=20) for _ in range(3)]
    for run in runs:
        output, _ = run.communicate(timeout=120)
        assert run.returncode == 0, output
    for process_id, _ in orders:
        assert shop.event_types(process_id) == ["payment.completed"]
        assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed", "confirmed"]


def test_the_loop_survives_faults_backs_off_and_stops_on_sigterm(shop, chain, proxy, app):
    process_id, address = shop.order(3)
    proxy.fail("eth_getBlockByNumber:latest", "hang", "http500", "malformed", "error",
              "garbage-result")
    loop = _watcher(app.config["DATABASE"], "--poll-interval", "0.1", "--backoff-max", "0.4")
    try:
        chain.transfer(address, 3 * UNIT)
        chain.mine(CONFIRMATIONS)
        deadline = time.monotonic() + 60
        while shop.event_types(process_id) != ["payment.completed"]:
            assert loop.poll() is None, loop.stdout.read()
            assert time.monotonic() < deadline, shop.event_types(process_id)
            time.sleep(0.1)
    finally:
        loop.send_signal(signal.SIGTERM)
        output, _ = loop.communicate(timeout=30)
    assert loop.returncode == 0, output
    # One backoff per fault; a real call that also outlasts the 0.5 s read timeout on a loaded
    # machine backs off once more, which is the same behaviour.
    assert output.count("retry in") >= 5, (output, proxy.calls, proxy.queued)
    assert SECRET not in output
    assert proxy.calls["eth_getBlockByNumber"] >= 6


def _wait_for(condition, what, loop, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert loop.poll() is None, loop.stdout.read()
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _scanned_block(app):
    conn = app.extensions["db"].connection()
    return conn.execute("SELECT scanned_block FROM networks WHERE id = 'hardhat'").fetchone()[0]


def test_the_loop_waits_out_a_node_that_is_down_and_picks_up_when_it_is_back(shop, chain, proxy,
                                                                              app):
    """Connections refused while the loop runs: each poll fails, is logged and retried after its
    backoff; nothing is counted meanwhile; once the node listens again the loop catches up."""
    process_id, address = shop.order(3)
    chain.transfer(address, 2 * UNIT)
    loop = _watcher(app.config["DATABASE"], "--poll-interval", "0.1", "--backoff-max", "0.4")
    try:
        _wait_for(lambda: shop.event_types(process_id) == ["payment.pending"], "pending", loop)
        proxy.down()
        chain.transfer(address, UNIT)
        chain.mine(CONFIRMATIONS)
        time.sleep(2)  # polls refused meanwhile: about five, 0.4 s apart
        assert shop.event_types(process_id) == ["payment.pending"]
        assert [t["status"] for t in shop.transfers(process_id)] == ["seen"]
        proxy.up()
        _wait_for(lambda: shop.event_types(process_id)[-1:] == ["payment.completed"],
                  "completed", loop)
    finally:
        loop.send_signal(signal.SIGTERM)
        output, _ = loop.communicate(timeout=30)
    assert loop.returncode == 0, output
    refused = [line for line in output.splitlines()
               if 'eth_getBlockByNumber("latest"): http://127.0.0.1:' in line
               and "unreachable (ConnectionError)" in line]
    assert len(refused) >= 3, output
    assert all(line.endswith("retry in 0.4s") for line in refused[1:]), refused
    assert SECRET not in output
    # The second transfer was deep enough when first read: the outcome only, no second pending.
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed", "confirmed"]
    _, completed = shop.events(process_id)[-1]
    assert completed["data"]["payment"]["amountPaid"] == "3"


def test_sigterm_during_a_step_commits_the_step_and_exits_0(shop, chain, proxy, app):
    """SIGTERM while the step's eth_getLogs is under way (a slow node): the step's transfer and
    scan position are committed, no further step or poll starts, exit status 0."""
    process_id, address = shop.order(3)
    chain.transfer(address, 3 * UNIT)
    head = chain.head()
    proxy.fail("eth_getLogs", "slow")
    loop = _watcher(app.config["DATABASE"], "--poll-interval", "0.1", read_timeout=20)
    try:
        _wait_for(proxy.slow_started.is_set, "the slow eth_getLogs", loop)
        assert shop.event_types(process_id) == []  # the step is under way, nothing committed yet
        loop.send_signal(signal.SIGTERM)
        output, _ = loop.communicate(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert loop.returncode == 0, output
    assert output.rstrip().endswith("watch: stopped"), output
    assert shop.event_types(process_id) == ["payment.pending"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["seen"]
    assert _scanned_block(app) == head
    assert proxy.calls["eth_getLogs"] == 1 and proxy.calls["eth_getBlockByNumber:latest"] == 1, \
        proxy.calls


def test_the_loop_outlives_a_database_error_and_goes_on_when_it_is_gone(shop, chain, app):
    """The loop's list of networks cannot be read (here: its table renamed away, on either
    backend): logged, retried with backoff, the loop goes on once the database answers again."""
    process_id, address = shop.order(3)
    db = app.extensions["db"]
    chain.transfer(address, 3 * UNIT)
    loop = _watcher(app.config["DATABASE"], "--poll-interval", "0.1", "--backoff-max", "0.4")
    try:
        _wait_for(lambda: shop.event_types(process_id) == ["payment.pending"], "pending", loop)
        with db.transaction() as conn:
            conn.execute("ALTER TABLE networks RENAME TO networks_away")
        time.sleep(2)  # several failed reads, 0.4 s apart at most
        assert loop.poll() is None
        with db.transaction() as conn:
            conn.execute("ALTER TABLE networks_away RENAME TO networks")
        chain.mine(CONFIRMATIONS)
        _wait_for(lambda: shop.event_types(process_id) == ["payment.pending", "payment.completed"],
                  "completed", loop)
    finally:
        loop.send_signal(signal.SIGTERM)
        output, _ = loop.communicate(timeout=30)
    assert loop.returncode == 0, output
    failed = [line for line in output.splitlines() if "watch: cannot read the networks" in line]
    assert len(failed) >= 3, output
    assert "networks" in failed[0] and failed[-1].endswith("retry in 0.4s"), failed


def test_once_with_a_database_error_exits_1_without_a_traceback(shop, app, caplog):
    with app.extensions["db"].transaction() as conn:
        conn.execute("ALTER TABLE networks RENAME TO networks_away")
    result = shop.watch(exit_code=1)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith(
        "watch: cannot read the networks ("), warnings
    assert "networks" in warnings[0][len("watch: cannot read the networks"):]
    with app.extensions["db"].transaction() as conn:
        conn.execute("ALTER TABLE networks_away RENAME TO networks")
    shop.watch()


def test_a_reorganisation_met_while_confirming_reads_again_from_a_kept_hash(shop, chain, proxy,
                                                                           caplog):
    """The chain is reorganised after the poll checked its kept hashes, just before it confirms:
    the transfer's block is gone, and so are the blocks below it down to the last kept hash K. The
    confirm phase's batch no longer finds the newest kept block: the chain moved, nothing
    confirmed. The poll reads again at once and finds the fork at K; the new branch pays in a
    block above it, and that counts, in the same run."""
    process_id, address = shop.order(4)
    shop.watch()  # keeps the hash of block K
    fork = chain.snapshot()
    chain.mine(2)
    orphan_tx, orphan_block = chain.transfer(address, 4 * UNIT)
    shop.watch()  # reads K+1..b (b: the transfer's block), keeps b's hash only
    assert shop.event_types(process_id) == ["payment.pending"]
    chain.mine(CONFIRMATIONS - 1)  # deep enough at the next poll

    paid = {}

    def reorganise():
        chain.revert(fork)
        paid["tx"], paid["block"] = chain.transfer(address, 5 * UNIT)  # another tx, in K+1'
        chain.mine(CONFIRMATIONS + 2)

    # The next poll's requests for blocks: its first batch (the head b+1, its kept hash b), the
    # step's batch (b+1, b and the logs), then the confirm phase's batch (b+1, the head, b): the
    # reorganisation comes just before that one.
    proxy.before("eth_getBlockByNumber", 2, reorganise)
    caplog.set_level(logging.INFO, logger="app.chain.watcher")
    shop.watch()
    assert "tx" in paid and paid["block"] < orphan_block
    moved = [r.getMessage() for r in caplog.records if r.getMessage().endswith("; reading again")]
    assert len(moved) == 1 and moved[0].startswith("watch hardhat: block "), moved
    assert shop.transfers(process_id) == [
        {"tx_hash": paid["tx"], "status": "confirmed", "amount": str(5 * UNIT),
         "block_number": paid["block"]},
        {"tx_hash": orphan_tx, "status": "orphaned", "amount": str(4 * UNIT),
         "block_number": orphan_block},
    ]
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
