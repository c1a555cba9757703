"""The migration runner of init-db: applies every version a database lacks (schema.py lists them),
in one transaction, so a failed upgrade leaves the database as it was. Version 1 is written with IF
NOT EXISTS, so on a database of a release from before versions it creates only what that database
lacks and keeps every row. What a new version derives from the rows already there is made here too,
in the same transaction (overview.py's rebuild).
"""
import time

from app.core.testnets import LIVE_CHAIN_IDS, TEST_CHAIN_IDS
from app.data import overview, processes, transfers
from app.data.schema import dialect, has_table, migrations, version

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
)


def _applied(conn) -> set[int]:
    if not has_table(conn, "schema_version"):
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_version")}


def _after(number) -> str:
    """SQL run right after migration `number`, in the same transaction, on a database that lacked
    it: what the migration's own file cannot know. Version 3 brought test and live networks; a
    network added before could only be classed by its chain id, so one that is neither a well-known
    test chain nor a well-known live one is made a test network until the operator sets its mode
    (init-db names them: app/domain/setup.py, networks_of_unknown_mode)."""
    if number == 3:
        known = ", ".join(str(chain_id) for chain_id in sorted(TEST_CHAIN_IDS | LIVE_CHAIN_IDS))
        return f"UPDATE networks SET testnet = 1 WHERE chain_id NOT IN ({known});"
    return ""


WATCHED_BEFORE_SECONDS = 30 * 86_400  # version 25 watches what became final this recently, or
# within PAYMENT_MONITORING_SECONDS when that is longer


def _derive(conn, applied, now, monitoring_seconds):
    """What a new version derives from the rows already there, in Python (exact sums SQLite's SQL
    cannot make), in the upgrade's transaction: version 20's overview_days, version 25's
    watch_list (the processes pending or final within WATCHED_BEFORE_SECONDS or
    `monitoring_seconds`, the longer), version 26's search keys on SQLite."""
    if 20 in applied:
        overview.rebuild(conn)
    if 25 in applied:
        transfers.fill_watch_list(conn, now - max(WATCHED_BEFORE_SECONDS, monitoring_seconds or 0))
    if 26 in applied and dialect(conn) == "sqlite":
        _search_keys(conn)


def _search_keys(conn):
    """Version 26 on SQLite (PostgreSQL's file does it in SQL): the search rows by their key."""
    rows = conn.execute("SELECT merchant_id, value, seq FROM process_search").fetchall()
    conn.executemany("INSERT INTO process_search_keys (key, seq) VALUES (?, ?)"
                     " ON CONFLICT DO NOTHING",
                     [(processes.search_key(m, value), seq) for m, value, seq in rows])
    conn.execute("DROP TABLE process_search")
    conn.execute("ALTER TABLE process_search_keys RENAME TO process_search")


def upgrade(conn, now=None, monitoring_seconds=None) -> tuple[int, int]:
    """Apply every migration the database lacks, in one transaction (`monitoring_seconds`: what
    version 25 starts watching). (version before, after).
    "Lacks" is by number, not only above the highest applied: versions developed side by side may
    be merged out of order (a database at 5 that lacks 4 gets 4)."""
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
                conn.execute("INSERT INTO schema_version (version, name, applied_at)"
                             " VALUES (?, ?, ?)", (number, filename, now))
            _derive(conn, {m[0] for m in pending}, now, monitoring_seconds)
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
        _derive(conn, {m[0] for m in pending}, now, monitoring_seconds)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return before, max(before, pending[-1][0])
