"""Schema versions (init-db upgrades an earlier release's database in place, keeping every row) and
copy-db (every row into an empty database of either kind; the copy serves the same answers)."""
import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook
from support import dbutil
from support.helpers import Api, FakeClock

from app import create_app
from app.core import keys
from app.data import schema as schema_rows
from app.data.processes import search_key
from app.db import init_db
from app.domain import merchants as merchant_service
from app.domain import processes as process_service
from app.domain.representation import iso
from app.webhooks.signing import new_secret as new_webhook_secret
from app.worker import Worker

DATA = Path(__file__).resolve().parent.parent / "data"
LATEST = {name: schema_rows.latest_version(name) for name in ("sqlite", "postgresql")}
# The numbers of the migration files (several engineers number theirs at once: gaps are fine).
VERSIONS = {name: [m[0] for m in schema_rows.migrations(name)] for name in ("sqlite", "postgresql")}


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


def _old_rows(conn, now, webhook_url, *, livemode=False, cancelled=True):
    """What an earlier release's code wrote, in the columns every release since the first has
    (today's code writes newer ones): a merchant and its key, a process kept with an Idempotency-Key
    and, with `cancelled`, one cancelled with its event. (merchant id, secret key, kept id,
    cancelled id)."""
    merchant_id, secret = merchant_service.new_merchant_id(), keys.new_secret_key(livemode)
    conn.execute("INSERT INTO merchants (id, name, livemode, public_key, webhook_secret,"
                 " webhook_url, disabled_at, created_at)"
                 " VALUES (?, 'Old shop', ?, ?, ?, ?, NULL, ?)",
                 (merchant_id, int(livemode), keys.new_public_key(livemode), new_webhook_secret(),
                  webhook_url, now))
    conn.execute("INSERT INTO secret_keys (merchant_id, key_hash, key_prefix, created_at)"
                 " VALUES (?, ?, ?, ?)",
                 (merchant_id, keys.hash_key(secret), keys.key_prefix(secret), now))
    kept, other = str(uuid.uuid4()), str(uuid.uuid4())
    rows = [(kept, "19.99", '{"orderRef":"A-1"}', "pending")]
    if cancelled:
        rows.append((other, "5", "{}", "cancelled"))
    for process_id, amount, metadata, status in rows:
        conn.execute("INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode,"
                     " created_at, updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (process_id, merchant_id, status, amount, metadata, int(livemode), now, now,
                      now + 1800))
    body = json.dumps({"processId": kept, "status": "pending", "amount": 19.99,
                       "metadata": {"orderRef": "A-1"}}, separators=(",", ":"))
    conn.execute("INSERT INTO idempotency_keys (merchant_id, key, request_hash, process_id,"
                 " response_body, created_at) VALUES (?, 'order-1', ?, ?, ?, ?)",
                 (merchant_id, process_service.request_fingerprint("19.99", '{"orderRef":"A-1"}'),
                  kept, body, now))
    if cancelled:  # pending: the upgrade makes it the first endpoint's delivery
        conn.execute("INSERT INTO events (id, merchant_id, process_id, type, payload, created_at,"
                     " status, attempts, next_attempt_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)",
                     ("evt_" + "0" * 32, merchant_id, other, "process.cancelled",
                      json.dumps({"type": "process.cancelled", "data": {"processId": other}}), now,
                      now))
    return merchant_id, secret, kept, other


def _fill(db, now, webhook_url):
    """A merchant with two processes through today's code: one kept with an Idempotency-Key, one
    cancelled. (merchant, secret key, kept id, cancelled id)."""
    merchant, secret = merchant_service.create(db, name="Old shop", livemode=False,
                                               webhook_url=webhook_url, now=now,
                                               allow_loopback=True)
    kept, _ = process_service.create_preorder(db, merchant, amount="19.99",
                                              metadata='{"orderRef":"A-1"}', now=now, ttl=1800,
                                              idempotency_key="order-1")
    other, _ = process_service.create_preorder(db, merchant, amount="5", metadata="{}", now=now,
                                               ttl=1800)
    process_service.cancel(db, json.loads(other)["processId"], now)
    return merchant, secret, json.loads(kept)["processId"], json.loads(other)["processId"]


def _counts(database):
    present = set(dbutil.query(database, "SELECT name FROM sqlite_master WHERE type = 'table'")
                  if not str(database).startswith("postgresql") else
                  dbutil.query(database, "SELECT tablename FROM pg_tables"
                               " WHERE schemaname = current_schema()"))
    return {t: dbutil.scalar(database, f"SELECT count(*) FROM {t}")
            for t in schema_rows.TABLES if (t,) in present}


def _serves_the_old_rows(database, clock, secret, kept, cancelled):
    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    try:
        api = Api(app.test_client(), secret)
        got = api.get(kept)
        assert got.status_code == 200 and got.get_json()["metadata"] == {"orderRef": "A-1"}
        assert api.get(cancelled).get_json()["status"] == "cancelled"
        replay = api.preorder({"amount": 19.99, "metadata": {"orderRef": "A-1"}},
                              headers={"Idempotency-Key": "order-1"})
        assert replay.status_code == 200 and replay.headers["Idempotent-Replayed"] == "true"
        assert replay.get_json()["processId"] == kept
        fresh = api.preorder()
        assert fresh.status_code == 200
        listed = [p["processId"] for p in api.list().get_json()["data"]]
        assert listed == [fresh.get_json()["processId"], cancelled, kept]  # newest first
    finally:
        app.extensions["db"].close_all()


@pytest.mark.sqlite_only
@pytest.mark.parametrize("release", ["71fdeb4", "0399af2"])
def test_init_db_upgrades_an_earlier_releases_sqlite_database_in_place(tmp_path, clock, release):
    """71fdeb4: the schema with the live payment tables; 0399af2: the first release, without them.
    Neither had schema_version nor init-db's file mark."""
    database = str(tmp_path / f"{release}.sqlite3")
    conn = sqlite3.connect(database, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.executescript((DATA / f"schema-{release}.sql").read_text())
    conn.execute("BEGIN")
    _, secret, kept, cancelled = _old_rows(conn, clock(), "http://127.0.0.1:1/hook")
    conn.execute("COMMIT")
    networks = release == "71fdeb4"  # the release with live payments: its networks get a mode
    if networks:
        for network_id, chain_id in (("local", 31337), ("polygon", 137)):
            conn.execute("INSERT INTO networks VALUES (?, ?, ?, 'http://127.0.0.1:1/', 3, 1, 0, 0,"
                         " NULL, 1)", (network_id, network_id.title(), chain_id))
    conn.close()
    before = _counts(database)

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        assert init_db() == (0, LATEST["sqlite"])
        assert init_db() == (LATEST["sqlite"], LATEST["sqlite"])  # a second run changes nothing
    app.extensions["db"].close_all()

    after = _counts(database)
    assert {t: after[t] for t in before if t in after} == before  # every row kept
    assert set(after) == set(schema_rows.TABLES)  # what the release lacked now exists
    assert after["deliveries"] == after["events"] == 1 and after["webhook_endpoints"] == 1
    assert dbutil.query(database, "SELECT version, name FROM schema_version ORDER BY version") == [
        (m[0], m[1]) for m in schema_rows.migrations("sqlite")]
    # The console's search index is built for the processes already there.
    assert dbutil.query(database, "SELECT key FROM process_search JOIN processes USING (seq)"
                        " WHERE id = ?", kept) == [
        (search_key(_merchant_of(database, kept), "a-1"),)]
    if networks:  # classed by chain id (docs/payments.md, "Test and live networks")
        listed = app.test_cli_runner().invoke(args=["networks", "list", "--json"])
        assert {n["id"]: n["testnet"] for n in json.loads(listed.output)} == {
            "local": True, "polygon": False}
    _serves_the_old_rows(database, clock, secret, kept, cancelled)


@pytest.mark.postgres_only
def test_init_db_upgrades_a_postgresql_database_from_before_versions(make_database, clock):
    """A database whose schema predates versions (no schema_version, no retention table): init-db
    brings it to the newest version in place."""
    import psycopg

    database = make_database("old")
    first = schema_rows.migrations("postgresql")[0][2]  # version 1: the schema before versions
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(first.replace(
            "CREATE INDEX IF NOT EXISTS events_created ON events (created_at);",
            "").split("-- Retention")[0])  # without the retention table
    with dbutil.connect(database) as conn:
        _, secret, kept, cancelled = _old_rows(conn, clock(), "http://127.0.0.1:1/hook")
    before = _counts(database)

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        assert init_db() == (0, LATEST["postgresql"])
    app.extensions["db"].close_all()
    after = _counts(database)
    assert {t: after[t] for t in before if t in after} == before
    assert set(after) == set(schema_rows.TABLES)
    assert after["deliveries"] == after["events"] == 1 and after["webhook_endpoints"] == 1
    _serves_the_old_rows(database, clock, secret, kept, cancelled)


def test_init_db_keeps_networks_of_unknown_mode_out_of_live_mode(make_database, clock):
    """A database of release 7695e4b (schema version 2, the last without test and live networks):
    a network of a well-known test chain becomes test, one of a well-known live chain stays live,
    one of any other chain id (the operator's private chain, say) is made test, and init-db says
    so; the operator then sets its mode."""
    database = make_database("release-7695e4b")
    script = (DATA / ("schema-7695e4b.sql" if dbutil.BACKEND == "sqlite"
                      else "schema-7695e4b.postgresql.sql")).read_text()
    if dbutil.BACKEND == "sqlite":
        with dbutil.connect(database) as conn:
            conn.executescript(script)
    else:
        import psycopg

        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(script)
    for network_id, chain_id in (("local", 31337), ("polygon", 137), ("private", 424242)):
        dbutil.execute(database, "INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                       " start_block, scanned_block, head_block, disabled_at, created_at)"
                       " VALUES (?, ?, ?, 'http://127.0.0.1:1/', 3, 1, 0, 0, NULL, 1)",
                       network_id, network_id.title(), chain_id)

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    try:
        runner = app.test_cli_runner()
        upgraded = runner.invoke(args=["init-db"])
        assert upgraded.exit_code == 0, upgraded.output
        assert upgraded.output.splitlines() == [
            f"Upgraded the database from schema version 2 to {LATEST[dbutil.BACKEND]}.",
            "Network private (chain id 424242) is now a test network: the release it was added with"
            " had no test and live modes, and its chain id is neither a well-known test chain nor a"
            " well-known live one. If it takes real payments: flask --app app networks set-mode"
            " private live"]

        def modes():
            listed = runner.invoke(args=["networks", "list", "--json"]).output
            return {n["id"]: n["testnet"] for n in json.loads(listed)}

        assert modes() == {"local": True, "polygon": False, "private": True}
        again = runner.invoke(args=["init-db"])  # says nothing more, changes nothing
        assert again.output == (
            f"Initialised the database (schema version {LATEST[dbutil.BACKEND]}).\n")
        assert runner.invoke(args=["networks", "set-mode", "private", "live"]).exit_code == 0
        assert runner.invoke(args=["init-db"]).output == again.output
        assert modes() == {"local": True, "polygon": False, "private": False}
    finally:
        app.extensions["db"].close_all()


@pytest.mark.postgres_only
def test_an_upgrade_indexes_metadata_holding_nul_on_postgresql(make_database, clock):
    # jsonb cannot hold NUL: a process stored before version 6 with one in its metadata made that
    # version's search index fail, and the whole upgrade with it.
    database = make_database("nul")
    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        init_db()
        keys = merchant_service.create(app.extensions["db"], name="S", livemode=False,
                                       webhook_url=None, now=clock())
    app.extensions["db"].close_all()
    merchant = keys[0].id
    dbutil.execute(database, "INSERT INTO processes (id, merchant_id, status, amount, metadata,"
                   " livemode, created_at, updated_at, expires_at)"
                   " VALUES (?, ?, 'pending', '5', ?, 0, 1, 1, 2)",
                   "p-nul", merchant, '{"ref":"A\\u0000B","n":7}')
    dbutil.execute(database, "DROP TABLE process_search")  # versions 6 and 26 applied again
    dbutil.execute(database, "DELETE FROM schema_version WHERE version IN (6, 26)")
    with app.app_context():
        init_db()
    app.extensions["db"].close_all()
    assert sorted(dbutil.query(database, "SELECT key FROM process_search"
                               " JOIN processes USING (seq) WHERE id = 'p-nul'")) == sorted(
        [(search_key(merchant, "7"),), (search_key(merchant, "a\ufffdb"),)])


def test_init_db_reports_the_version_and_a_second_run_changes_nothing(app, runner):
    result = runner.invoke(args=["init-db"])
    assert result.exit_code == 0
    assert result.output == f"Initialised the database (schema version {LATEST[dbutil.BACKEND]}).\n"
    assert dbutil.query(app.config["DATABASE"],
                        "SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in VERSIONS[dbutil.BACKEND]]  # a row per version


# --- copy-db -------------------------------------------------------------------------------------

@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
def test_copy_db_moves_every_row_and_the_copy_serves_the_same(app, client, runner, clock,
                                                              make_database, receiver,
                                                              target_kind):
    db = app.extensions["db"]
    merchant, secret, kept, cancelled = _fill(db, clock(), receiver.url("/hook"))
    source = app.config["DATABASE"]
    target = make_database("copy", backend=target_kind)
    api = Api(client, secret)
    answers = {pid: api.get(pid).get_data(as_text=True) for pid in (kept, cancelled)}

    result = runner.invoke(args=["copy-db", target])
    assert result.exit_code == 0, result.output
    assert result.output.endswith(
        f"Copied {sum(_counts(source).values())} rows into the new database.\n")
    assert _counts(target) == _counts(source)
    assert dbutil.query(target, "SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in VERSIONS[target_kind]]

    # Refused once the target holds rows, whatever it holds.
    again = runner.invoke(args=["copy-db", target])
    assert again.exit_code == 1
    assert "TARGET is not empty (merchants has rows" in again.output

    copy = create_app({"TESTING": True, "DATABASE": target, "CLOCK": clock})
    try:
        copied = Api(copy.test_client(), secret)  # the same secret key authenticates
        assert {pid: copied.get(pid).get_data(as_text=True) for pid in answers} == answers
        public = copy.test_client().get(f"/payment-button/process/{kept}/public",
                                        headers={"x-public-key": merchant.public_key})
        assert public.status_code == 200 and public.get_json()["processId"] == kept
        replay = copied.preorder({"amount": 19.99, "metadata": {"orderRef": "A-1"}},
                                 headers={"Idempotency-Key": "order-1"})
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.get_json()["processId"] == kept
        fresh = copied.preorder().get_json()["processId"]
        assert [p["processId"] for p in copied.list().get_json()["data"]] == [fresh, cancelled,
                                                                               kept]
        # The pending event is delivered from the new database, signed as before.
        with Worker.from_app(copy) as worker:
            worker.run_once()
        [request] = receiver.wait_for(1)
        body = Webhook(merchant.webhook_secret).verify(request.body, request.headers)
        assert (body["type"], body["data"]["processId"]) == ("process.cancelled", cancelled)
        assert dbutil.query(target, "SELECT status FROM deliveries") == [("delivered",)]
        assert dbutil.query(source, "SELECT status FROM deliveries") == [("pending",)]
    finally:
        copy.extensions["db"].close_all()


def test_copy_db_refuses_a_target_with_tables_of_another_program(runner, make_database, tmp_path):
    other = str(tmp_path / "other.sqlite3")
    dbutil.execute(other, "CREATE TABLE notes (text TEXT)")
    result = runner.invoke(args=["copy-db", other])
    assert result.exit_code == 1
    assert "TARGET is not empty (table notes is not the service's)" in result.output
    assert dbutil.query(other, "SELECT name FROM sqlite_master") == [("notes",)]


def test_copy_db_refuses_the_configured_database_itself(app, runner):
    result = runner.invoke(args=["copy-db", app.config["DATABASE"]])
    assert result.exit_code == 1 and "TARGET is the configured database itself" in result.output


def test_both_backends_have_the_same_tables_and_columns_and_copy_db_knows_every_table(
        make_database, clock):
    """A schema change made to one backend's migrations only, or a new table copy-db would leave
    behind, fails here."""
    shapes = {}
    for kind in ("sqlite", "postgresql"):
        database = make_database(f"shape-{kind}", backend=kind)
        app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
        with app.app_context():
            init_db()
            conn = app.extensions["db"].connection()
            shapes[kind] = {table: schema_rows.columns(conn, table)
                            for table in schema_rows.tables(conn)}
        app.extensions["db"].close_all()
    assert shapes["sqlite"] == shapes["postgresql"]
    assert set(shapes["sqlite"]) == set(schema_rows.TABLES) | {"schema_version"}


def test_init_db_upgrade_classes_existing_networks_by_chain_id_and_keeps_transfers(
        make_database, clock):
    """A database at version 2 (the release before test networks): its networks keep testnet = 0
    and are classed by their chain id alone (31337 and Sepolia test, 137 live); its transfers are
    kept, and a transfer may now be `reversed`."""
    database = make_database("v2")
    kind = "postgresql" if database.startswith("postgresql") else "sqlite"
    with dbutil.connect(database) as conn:
        for _number, _name, sql in schema_rows.migrations(kind)[:2]:
            conn.executescript(sql) if kind == "sqlite" else conn.execute(sql)
        conn.execute("CREATE TABLE schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at BIGINT NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1, '0001_initial.sql', 1), "
                     "(2, '0002_payment_choices.sql', 1)")
        for network_id, chain_id in (("local", 31337), ("sepolia", 11155111), ("polygon", 137)):
            conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                         " start_block, scanned_block, head_block, created_at)"
                         " VALUES (?, ?, ?, 'http://127.0.0.1:1/', 3, 1, 0, 0, 1)",
                         (network_id, network_id.title(), chain_id))
        _, _, process_id, _ = _old_rows(conn, clock(), None, livemode=True, cancelled=False)
        transfer = (137, "0x" + "aa" * 32, 0, "polygon", process_id, "0x" + "11" * 20,
                    "0x" + "22" * 20, "5000000", 9, "0x" + "bb" * 32, 1, "confirmed", 1, 2)
        conn.execute("INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
                     " token_contract, from_address, amount, block_number, block_hash,"
                     " block_timestamp, status, seen_at, confirmed_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", transfer)

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        assert init_db() == (2, LATEST[kind])
    listed = app.test_cli_runner().invoke(args=["networks", "list", "--json"])
    app.extensions["db"].close_all()
    assert {n["id"]: n["testnet"] for n in json.loads(listed.output)} == {
        "local": True, "sepolia": True, "polygon": False}
    assert dbutil.query(database, "SELECT id, testnet FROM networks ORDER BY id") == [
        ("local", 0), ("polygon", 0), ("sepolia", 0)]
    columns = ("chain_id, tx_hash, log_index, network_id, process_id, token_contract, from_address,"
               " amount, block_number, block_hash, block_timestamp, status, seen_at, confirmed_at")
    assert dbutil.query(database, f"SELECT {columns} FROM transfers") == [transfer]
    dbutil.execute(database, "UPDATE transfers SET status = 'reversed'")
    with pytest.raises(Exception, match="(?i)check"):
        dbutil.execute(database, "UPDATE transfers SET status = 'gone'")


def test_init_db_upgrade_prices_existing_processes_merchants_and_payments_in_usd(make_database,
                                                                                 clock):
    """A database of the release before currencies (version 16), with a payment confirmed: its
    merchant and processes are in USD, its assets pegged to USD, and its payment shows the par quote
    it was made at; reconcile's rule still holds for it."""
    database = make_database("v16")
    kind = "postgresql" if database.startswith("postgresql") else "sqlite"
    with dbutil.connect(database) as conn:
        conn.execute("CREATE TABLE schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at BIGINT NOT NULL)")
        for number, name, sql in schema_rows.migrations(kind):
            if number <= 16:
                conn.executescript(sql) if kind == "sqlite" else conn.execute(sql)
                conn.execute("INSERT INTO schema_version VALUES (?, ?, 1)", (number, name))
        merchant_id, secret, process_id, _ = _old_rows(conn, clock(), None, cancelled=False)
        conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                     " start_block, scanned_block, head_block, created_at) VALUES"
                     " ('local', 'Local', 31337, 'http://127.0.0.1:1/', 3, 1, 0, 0, 1)")
        token = "0x" + "11" * 20
        conn.execute("INSERT INTO assets (id, network_id, symbol, name, contract, decimals,"
                     " created_at) VALUES ('usdc', 'local', 'USDC', 'USD Coin', ?, 6, 1)", (token,))
        conn.execute("INSERT INTO payments (process_id, merchant_id, address_index, address,"
                     " asset_id, network_id, chain_id, token_contract, decimals, amount_due,"
                     " created_at, updated_at)"
                     " VALUES (?, ?, 0, ?, 'usdc', 'local', 31337, ?, 6, '19990000', ?, ?)",
                     (process_id, merchant_id, "0x" + "22" * 20, token, clock(), clock()))

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        assert init_db() == (16, LATEST[kind])
    runner = app.test_cli_runner()
    try:
        shown = Api(app.test_client(), secret).get(process_id).get_json()
        assert (shown["amount"], shown["currency"]) == (19.99, "USD")
        assert shown["payment"]["quote"] == {
            "currency": "USD", "amount": "19.99", "rate": "1", "pair": None, "inverse": False,
            "source": "par", "networkId": None, "feed": None, "roundId": None,
            "rateUpdatedAt": None, "quotedAt": iso(clock())}
        assets = json.loads(runner.invoke(args=["assets", "list", "--json"]).output)
        assert [a["peg"] for a in assets] == ["USD"]
        fresh = Api(app.test_client(), secret).preorder({"amount": 5})
        assert fresh.get_json()["currency"] == "USD"  # the merchant's, upgraded
        assert dbutil.query(database, "SELECT currency FROM merchants") == [("USD",)]
        assert dbutil.query(database, "SELECT process_id, network_id, token_contract, address"
                            " FROM watch_list") == [(process_id, "local", token, "0x" + "22" * 20)]
    finally:
        app.extensions["db"].close_all()


def _merchant_of(database, process_id):
    return dbutil.scalar(database, "SELECT merchant_id FROM processes WHERE id = ?", process_id)
