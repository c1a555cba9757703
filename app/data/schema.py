"""SQL about the schema itself: versions and upgrades, liveness, the reset of `init-db --reset`, and
the row copy of `copy-db`.

Versions: `app/migrations/<dialect>/NNNN_name.sql`, one numbered file per version and backend. The
table `schema_version` holds a row per version applied. `upgrade` applies every missing file in order,
in one transaction, so a failed upgrade leaves the database as it was. A database of a release from
before versions (no `schema_version` table) is at version 0: version 1 is written with IF NOT EXISTS,
so applying it creates only what such a database lacks and keeps every row.
"""
from importlib import resources

from app.core.testnets import LIVE_CHAIN_IDS, TEST_CHAIN_IDS

# Every table, parents before children (the order copy-db inserts in); schema_version is not copied.
TABLES = (
    "merchants", "secret_keys", "webhook_endpoints", "processes", "events", "deliveries",
    "delivery_attempts", "idempotency_keys",
    "networks", "rates", "assets", "merchant_wallets", "merchant_payouts", "network_factories", "payments",
    "payment_choices", "transfers", "unexpected_transfers", "chain_blocks", "refunds", "collections",
    "collection_items",
    "delivery_totals", "relayed_authorizations", "relay_refusals",
    "users", "console_sessions", "login_failures", "login_locks", "process_search", "overview_days",
    "links", "link_hits", "watcher_leases",
)

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
)


def dialect(conn) -> str:
    """'postgresql' for app/db/postgres.py's connections, 'sqlite' for sqlite3's."""
    return getattr(conn, "dialect", "sqlite")


def migrations(name) -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration file of dialect `name`, in order."""
    folder = resources.files("app") / "migrations" / name
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text("utf-8")))
    return sorted(found)


def latest_version(name) -> int:
    return migrations(name)[-1][0]


def _has_table(conn, table) -> bool:
    if dialect(conn) == "postgresql":
        return conn.execute("SELECT to_regclass(?) IS NOT NULL", (table,)).fetchone()[0]
    return conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()[0] > 0


def version(conn) -> int:
    """The schema version of the database; 0 for one without our version table."""
    if not _has_table(conn, "schema_version"):
        return 0
    return conn.execute("SELECT COALESCE(max(version), 0) FROM schema_version").fetchone()[0]


def _applied(conn) -> set[int]:
    if not _has_table(conn, "schema_version"):
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_version")}


def _after(number) -> str:
    """SQL run right after migration `number`, in the same transaction, on a database that lacked
    it: what the migration's own file cannot know. Version 3 brought test and live networks; a
    network added before could only be classed by its chain id, so one that is neither a well-known
    test chain nor a well-known live one is made a test network until the operator sets its mode
    (init-db names them: app/domain/payments.py, networks_of_unknown_mode)."""
    if number == 3:
        known = ", ".join(str(chain_id) for chain_id in sorted(TEST_CHAIN_IDS | LIVE_CHAIN_IDS))
        return f"UPDATE networks SET testnet = 1 WHERE chain_id NOT IN ({known});"
    return ""


def _derive(conn, applied):
    """What a new version derives from the rows already there, in Python (exact sums SQLite's SQL
    cannot make), in the upgrade's transaction: version 20's overview_days."""
    if 20 in applied:
        from app.data import overview  # it reads this module's dialect()
        overview.rebuild(conn)


def upgrade(conn, now=None) -> tuple[int, int]:
    """Apply every migration the database lacks, in one transaction. (version before, after).
    "Lacks" is by number, not only above the highest applied: versions developed side by side may
    be merged out of order (a database at 5 that lacks 4 gets 4)."""
    import time

    now = int(time.time() if now is None else now)
    name = dialect(conn)
    if name == "postgresql":
        conn.execute("BEGIN")
        try:
            # Two init-db at once: the second waits, then finds the schema up to date.
            conn.execute("SELECT pg_advisory_xact_lock(7101)")
            conn.execute(_VERSION_TABLE)
            before, applied = version(conn), _applied(conn)
            pending = [m for m in migrations(name) if m[0] not in applied]
            for number, filename, sql in pending:
                conn.execute(sql)
                if _after(number):
                    conn.execute(_after(number))
                conn.execute("INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                             (number, filename, now))
            _derive(conn, {m[0] for m in pending})
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise
        return before, max(before, pending[-1][0]) if pending else before
    # SQLite: executescript commits any open transaction first, so the script carries its own.
    before, applied = version(conn), _applied(conn)
    pending = [m for m in migrations(name) if m[0] not in applied]
    if not pending:
        return before, before
    script = ["BEGIN IMMEDIATE;", _VERSION_TABLE + ";"]
    for number, filename, sql in pending:
        script.append(sql)
        script.append(_after(number))
        script.append(f"INSERT INTO schema_version (version, name, applied_at)"
                      f" VALUES ({number}, '{filename}', {now});")
    try:
        conn.executescript("\n".join(script))  # its transaction stays open: committed below
        _derive(conn, {m[0] for m in pending})
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return before, max(before, pending[-1][0])


def ping(conn) -> bool:
    """True when the database answers and holds our schema (not merely a file that opens)."""
    return conn.execute("SELECT count(*) FROM merchants").fetchone()[0] >= 0


def tables(conn) -> list[str]:
    """The names of the tables in the database (ours or not)."""
    if dialect(conn) == "postgresql":
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
        )
    else:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'"
            " ORDER BY name"
        )
    return [row[0] for row in rows]


def drop_all(conn):
    """Drop every table (init-db --reset)."""
    if dialect(conn) == "postgresql":
        for table in tables(conn):
            conn.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
        return
    conn.execute("PRAGMA foreign_keys = OFF")
    for table in tables(conn):
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    conn.execute("PRAGMA foreign_keys = ON")


# --- copy-db -------------------------------------------------------------------------------------

def has_rows(conn) -> list[str]:
    """The tables of ours that hold at least one row."""
    present = set(tables(conn))
    return [t for t in TABLES if t in present
            and conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None]


def columns(conn, table) -> list[str]:
    if dialect(conn) == "postgresql":
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            (table,),
        )
        return [row[0] for row in rows]
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def count(conn, table) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def read_rows(conn, table, names, batch=5000):
    """Every row of `table` (the columns `names`), in primary-key order, in batches."""
    cursor = conn.execute(f"SELECT {', '.join(names)} FROM {table}")
    while True:
        rows = cursor.fetchmany(batch)
        if not rows:
            return
        yield [tuple(row) for row in rows]


def insert_rows(conn, table, names, rows):
    marks = ", ".join("?" * len(names))
    conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", rows)


def reset_identities(conn):
    """After explicit ids were inserted (copy-db), PostgreSQL's identity columns continue after the
    largest; SQLite's rowid aliases do that by themselves."""
    if dialect(conn) != "postgresql":
        return
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    for table, column in rows:
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
            f" COALESCE((SELECT max({column}) FROM {table}), 0) + 1, false)"
        )
