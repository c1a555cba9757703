"""SQL about the schema itself: its versions, liveness, the reset of `init-db --reset`, and the row
copy of `copy-db`. Every module of app/data reads `dialect` here, so this one imports none of them;
the upgrade that applies the versions is migrate.py's.

Versions: `app/migrations/<dialect>/NNNN_name.sql`, one numbered file per version and backend. The
table `schema_version` holds a row per version applied. A database of a release from before
versions (no `schema_version` table) is at version 0.
"""
from importlib import resources

# Every table, parents before children (the order copy-db inserts in; watch_list before payments,
# whose trigger adds to it what it holds already); schema_version is not copied.
TABLES = (
    "merchants", "secret_keys", "webhook_endpoints", "processes", "watch_list", "events",
    "deliveries", "delivery_attempts", "idempotency_keys",
    "networks", "rates", "assets", "merchant_wallets", "merchant_payouts", "network_factories",
    "payments", "payment_choices", "transfers", "unexpected_transfers",
    "chain_blocks", "refunds", "collections", "collection_items",
    "delivery_totals", "relayed_authorizations", "relay_refusals",
    "users", "console_sessions", "login_failures", "login_locks", "process_search", "overview_days",
    "links", "link_hits", "watcher_leases",
)

def dialect(conn) -> str:
    """'postgresql' for app/db/postgres.py's connections, 'sqlite' for sqlite3's."""
    return getattr(conn, "dialect", "sqlite")


def fetch_as(conn, sql, params, make) -> list:
    """Every row of `sql`, each built by `make` (a named tuple's _make) from its values as the
    driver reads it: one object a row, for a read of many rows (the watcher's full read)."""
    if dialect(conn) == "postgresql":
        return conn.fetch_as(sql, params, make)
    cursor = conn.cursor()
    cursor.row_factory = lambda _, row: make(row)
    return cursor.execute(sql, params).fetchall()


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


def has_table(conn, table) -> bool:
    if dialect(conn) == "postgresql":
        return conn.execute("SELECT to_regclass(?) IS NOT NULL", (table,)).fetchone()[0]
    return conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()[0] > 0


def version(conn) -> int:
    """The schema version of the database; 0 for one without our version table."""
    if not has_table(conn, "schema_version"):
        return 0
    return conn.execute("SELECT COALESCE(max(version), 0) FROM schema_version").fetchone()[0]


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
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name"
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
