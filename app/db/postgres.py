"""The PostgreSQL backend: psycopg 3 with a connection pool per process (psycopg_pool).

`PostgresDatabase` offers what `SqliteDatabase` does (`connection()`, `transaction()`, rows by name
and by index, `release()` at the end of a request), so the SQL in app/data/ is written once:

- Placeholders: the data layer writes `?` and `:name` (sqlite3's styles); `_translate` rewrites
  them to psycopg's `%s` and `%(name)s` once per statement text (cached), leaving quoted text alone.
- Rows: `Row`, a tuple that is also indexed by column name and has `keys()`, like sqlite3.Row.
- Transactions: connections run in autocommit and `transaction()` issues BEGIN/COMMIT itself, as the
  SQLite backend does; READ COMMITTED. The data layer's guarded UPDATEs are correct under it (a
  second writer waits for the row and re-checks the WHERE); the two places that relied on SQLite's
  single writer take a row or advisory lock instead (app/data/idempotency.py, app/data/outbox.py).
- A request's reads use one pooled connection (`connection()`), given back by `release()` when the
  request ends; a transaction uses that connection when the thread holds one, else borrows one for
  its own length.
- Availability: a server that cannot be reached (stopped, restarting, network) or a pool with no
  connection to give within POSTGRES_POOL_TIMEOUT_SECONDS is `DatabaseUnavailable`-like (503, see
  `is_unavailable`); a broken connection is discarded by the pool when given back, and new ones are
  made as soon as the server answers again: no restart is needed. While the pool's last attempt to
  connect failed, a request waits UNREACHABLE_WAIT_SECONDS at most, not the pool's timeout: queueing
  for a connection the pool cannot make only delays the 503 (`_getconn`).
- Hung peers: every session bounds how long it waits for a lock and how long a transaction of a
  process that stopped sending (SIGSTOP, a frozen host) or cannot be reached keeps its locks
  (`SESSION_SETTINGS`, `KEEPALIVES`): at most HUNG_SESSION_SECONDS (app/db/interface.py), so no hung
  process holds the others. A statement that waited past `lock_timeout` is a 503 for a request.
"""
import logging
import os
import re
import threading
import time
from contextlib import contextmanager

import psycopg
import psycopg_pool
from psycopg import pq

from app.data import migrate
from app.data import schema as schema_rows
from app.db.health import WriteFailures
from app.db.interface import HUNG_SESSION_SECONDS, DatabaseUnavailable

log = logging.getLogger(__name__)

# The channel app/migrations/postgresql/0001_initial.sql's trigger notifies when events are written.
EVENTS_CHANNEL = "preorder_events"

# Errors that mean the database cannot serve now (503): connection lost or refused, server shutting
# down, read-only (a standby), lock or statement timeouts (LockNotAvailable past lock_timeout),
# deadlock or serialization failures (all OperationalError in psycopg), a session the server ended
# for idling in a transaction, a closed connection, a pool with nothing to give in time.
_UNAVAILABLE = (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout,
                psycopg_pool.TooManyRequests, psycopg.errors.ReadOnlySqlTransaction,
                psycopg.errors.CannotConnectNow, psycopg.errors.IdleInTransactionSessionTimeout)


def is_unavailable(error: BaseException) -> bool:
    return isinstance(error, _UNAVAILABLE)


# While the server cannot be reached: how long a request waits for the pool (a new connection
# attempt may succeed meanwhile: that is how the service finds the server back), and how long the
# pool keeps retrying one connection in the background (1 s, 2 s, ... apart) before the next request
# starts a new attempt; the default (5 minutes, the gaps doubling up to minutes) would delay the
# recovery.
UNREACHABLE_WAIT_SECONDS = 0.5
RECONNECT_TIMEOUT_SECONDS = 5.0

ERRORS = (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.TooManyRequests)

# What a session may hold, however its process fares (HUNG_SESSION_SECONDS at most):
# - lock_timeout: a statement waits this long for a lock at most, then fails (a request answers
#   503, a watcher's poll is retried) rather than queueing behind a hung holder;
# - idle_in_transaction_session_timeout: a transaction whose client sent nothing for this long (a
#   stopped or stuck process) is ended by the server, rolled back, its locks freed;
# - the server's TCP keepalives and tcp_user_timeout: a client host that is gone or cut off is
#   noticed within it and its session ended.
# And no JIT compilation: every statement reads through indexes, but on a large table the planner's
# cost estimate passes jit_above_cost, and compiling then costs more than running the statement.
SESSION_SETTINGS = {
    "lock_timeout": f"{HUNG_SESSION_SECONDS // 2}s",
    "idle_in_transaction_session_timeout": f"{HUNG_SESSION_SECONDS}s",
    "tcp_keepalives_idle": "4",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",  # 4 + 3 * 2 = 10 s of silence
    "tcp_user_timeout": f"{HUNG_SESSION_SECONDS}s",
    "jit": "off",
}
# The client's side (libpq): a server that is gone or cut off fails the call within the same time
# instead of leaving it waiting for ever.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 4, "keepalives_interval": 2,
              "keepalives_count": 3, "tcp_user_timeout": HUNG_SESSION_SECONDS * 1000}

# SQLSTATE classes of a write the server could not store: insufficient resources (disk full, out of
# memory) and system errors (I/O). /healthz reports them for a while (health.py).
WRITE_FAILURE_CLASSES = ("53", "58")


def write_failure(error: BaseException):
    """The reason to report for a write that failed with `error` when the server could not store it
    (the SQLSTATE and its name only: the server's message names its files); else None."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is None or sqlstate[:2] not in WRITE_FAILURE_CLASSES:
        return None
    return f"the server could not store it ({type(error).__name__}, SQLSTATE {sqlstate})"

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|::|:([A-Za-z_]\w*)|\?|%")
_translated = {}


def _token(match):
    text = match.group(0)
    if text == "?":
        return "%s"
    if text == "%":
        return "%%"
    if match.group(1):
        return f"%({match.group(1)})s"
    return text  # a quoted literal or identifier, or a :: cast


def _translate(sql):
    """`?` and `:name` placeholders as psycopg's `%s` and `%(name)s`."""
    query = _translated.get(sql)
    if query is None:
        query = _TOKENS.sub(_token, sql)
        if len(_translated) < 4096:
            _translated[sql] = query
    return query


class Row(tuple):
    """A result row by index and by column name, with keys(), like sqlite3.Row."""

    __slots__ = ()
    _index = {}

    def __getitem__(self, key):
        if key.__class__ is str:
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self):
        return list(self._index)


_row_classes = {}


def _row_factory(cursor):
    description = cursor.description
    if description is None:
        return tuple
    names = tuple(column.name for column in description)
    cls = _row_classes.get(names)
    if cls is None:
        cls = type("Row", (Row,), {"__slots__": (), "_index": {n: i for i, n in enumerate(names)}})
        _row_classes[names] = cls
    return cls


class Connection:
    """A pooled psycopg connection with sqlite3's calling conventions (see the module docstring)."""

    dialect = "postgresql"
    __slots__ = ("raw",)

    def __init__(self, raw):
        self.raw = raw

    def execute(self, sql, params=None):
        if params is None:
            return self.raw.execute(sql)
        return self.raw.execute(_translate(sql), params)

    def fetch_as(self, sql, params, make):
        """Every row of `sql`, each built by `make` from its values (no Row in between)."""
        return self.raw.cursor(row_factory=lambda _: make).execute(_translate(sql),
                                                                   params).fetchall()

    def executemany(self, sql, rows):
        cursor = self.raw.cursor()
        cursor.executemany(_translate(sql), rows)
        return cursor

    @property
    def in_transaction(self):
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def rollback(self):
        if not self.raw.closed and self.in_transaction:
            self.raw.execute("ROLLBACK")

    def listen(self, channel):
        self.raw.execute(f"LISTEN {channel}")

    def close(self):
        self.raw.close()


class PostgresDatabase:
    dialect = "postgresql"
    errors = ERRORS
    is_unavailable = staticmethod(is_unavailable)

    def __init__(self, url, *, pool_min=1, pool_max=10, pool_timeout=10.0, connect_timeout=2):
        self.url = url
        self.pool_min, self.pool_max = pool_min, pool_max
        self.pool_timeout, self.connect_timeout = pool_timeout, connect_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pool, self._pool_pid = None, None
        self.unreachable = False  # the pool's last attempt to connect failed
        self.write_failures = WriteFailures()  # for /healthz (health.py)

    def _connect_args(self):
        return {"autocommit": True, "row_factory": _row_factory,
                "connect_timeout": self.connect_timeout, **KEEPALIVES}

    def pool(self):
        """This process's pool, made on first use (and again after a fork: a child never uses its
        parent's connections)."""
        pid = os.getpid()
        if self._pool is None or self._pool_pid != pid:
            with self._lock:
                if self._pool is None or self._pool_pid != pid:
                    self.unreachable = False
                    self._pool = psycopg_pool.ConnectionPool(
                        self.url, min_size=self.pool_min, max_size=self.pool_max,
                        timeout=self.pool_timeout, kwargs=self._connect_args(), open=False,
                        name=f"preorder-{pid}", configure=self._configure,
                        connection_class=self._connection_class(),
                        reconnect_timeout=RECONNECT_TIMEOUT_SECONDS,
                    )
                    self._pool.open(wait=False)
                    self._pool_pid = pid
                    self._local = threading.local()
        return self._pool

    def _connection_class(self):
        """psycopg's Connection, noting a failed attempt to connect (success is noted by
        `_configure`, which the pool calls on every new connection)."""
        database = self

        class PooledConnection(psycopg.Connection):
            @classmethod
            def connect(cls, *args, **kwargs):
                try:
                    return super().connect(*args, **kwargs)
                except psycopg.OperationalError:
                    database.unreachable = True
                    raise

        return PooledConnection

    def _configure(self, raw):
        _durable(raw)
        _bounded(raw)
        self.unreachable = False

    def _getconn(self):
        """A connection from the pool within POSTGRES_POOL_TIMEOUT_SECONDS (PoolTimeout: a 503). A
        busy pool (every connection it may open is made and in use) queues the request for the whole
        timeout, as psycopg_pool does. Otherwise the pool is opening connections, and the request
        waits in slices of UNREACHABLE_WAIT_SECONDS, giving up as soon as one attempt failed."""
        pool = self.pool()
        deadline = time.monotonic() + self.pool_timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return pool.getconn(timeout=min(left, UNREACHABLE_WAIT_SECONDS))
            except psycopg_pool.PoolTimeout:
                if self.unreachable or left <= UNREACHABLE_WAIT_SECONDS:
                    raise
            if pool.get_stats()["pool_size"] >= self.pool_max:
                return pool.getconn(timeout=max(0.0, deadline - time.monotonic()))

    def _held(self):
        held = getattr(self._local, "conn", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        return None

    def connection(self):
        """The calling thread's connection until `release()` (the end of the request)."""
        conn = self._held()
        if conn is None:
            conn = Connection(self._getconn())
            self._local.conn = (os.getpid(), conn)
        return conn

    def release(self):
        conn = self._held()
        if conn is None:
            return
        self._local.conn = None
        try:
            conn.rollback()
        except psycopg.Error:
            pass  # broken: the pool discards it
        self.pool().putconn(conn.raw)

    @contextmanager
    def transaction(self, *, sync_outside_lock=False):
        """BEGIN, COMMIT on success, ROLLBACK on any exception. (`sync_outside_lock` is SQLite's:
        PostgreSQL's commits already wait for their WAL flush without blocking other writers.)"""
        conn = self._held()
        borrowed = conn is None
        if borrowed:
            conn = Connection(self._getconn())
        try:
            conn.raw.execute("BEGIN")
            try:
                yield conn
                conn.raw.execute("COMMIT")
            except BaseException as e:
                reason = write_failure(e)
                if reason is not None:
                    self.write_failures.failed(reason)
                try:
                    conn.rollback()
                except psycopg.Error:
                    pass  # the connection is gone; the server rolls back
                raise
        finally:
            if borrowed:
                self.pool().putconn(conn.raw)
        self.write_failures.succeeded()

    @contextmanager
    def snapshot(self):
        """A read-only transaction (BEGIN READ ONLY, REPEATABLE READ: one snapshot for every read
        of the block) on the calling thread's connection, rolled back when the block ends; any
        write in it fails."""
        conn = self.connection()
        conn.rollback()  # the held connection may be inside an implicit transaction
        conn.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield conn
        finally:
            try:
                conn.rollback()
            except psycopg.Error:
                pass  # broken: the pool discards it

    def listener(self, channel):
        """A connection of its own (not pooled) LISTENing on `channel`; the caller closes it."""
        raw = psycopg.connect(self.url, **self._connect_args())
        conn = Connection(raw)
        conn.listen(channel)
        return conn

    def wait_for_events(self, seconds, stopping):
        """Return when events were written since the last call (a NOTIFY on EVENTS_CHANNEL, which
        PostgreSQL delivers at commit), after `seconds`, or once `stopping()`. The calling thread
        keeps one LISTENing connection of its own, outside the pool; notifications that arrive
        while it does something else wait on that connection. When the server cannot be reached it
        simply sleeps (the next poll reports the failure)."""
        deadline = time.monotonic() + seconds
        listener = getattr(self._local, "listener", None)
        if listener is None or listener.raw.closed:
            try:
                self._local.listener = self.listener(EVENTS_CHANNEL)
            except psycopg.Error as e:
                log.warning("cannot listen for new events: %s", e)
                while not stopping() and time.monotonic() < deadline:
                    time.sleep(0.1)
            return  # listening from now on: the caller polls once for what came before
        try:
            while not stopping():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                for _ in listener.raw.notifies(timeout=min(left, 0.25), stop_after=1):
                    return
        except psycopg.Error:
            listener.close()
            self._local.listener = None

    def close_all(self):
        with self._lock:
            pool, self._pool = self._pool, None
        self._local = threading.local()
        if pool is not None and self._pool_pid == os.getpid():
            pool.close()

    def init_schema(self, *, reset=False, monitoring_seconds=None):
        """Bring the schema to the newest version in one transaction (app/data/migrate.py); the
        database itself is the operator's (CREATE DATABASE). Returns (version before, after)."""
        with self.pool().connection() as raw:
            conn = Connection(raw)
            _bounded(raw, unbounded=True)  # an upgrade waits its turn and takes its time
            try:
                if reset:
                    with self.transaction_on(conn):
                        schema_rows.drop_all(conn)
                return migrate.upgrade(conn, monitoring_seconds=monitoring_seconds)
            finally:
                try:
                    _bounded(raw)  # back to the pool as every other connection is
                except psycopg.Error:
                    raw.close()  # the pool discards it

    @contextmanager
    def transaction_on(self, conn):
        conn.raw.execute("BEGIN")
        try:
            yield conn
            conn.raw.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise

    def check(self):
        """For /healthz: the server answers, holds our schema, and accepts writes (not a standby
        or a read-only database, no write of this process refused by the server recently: a full
        disk is seen by the writes, PostgreSQL offers no cheap probe of it)."""
        raw = self._getconn()
        try:
            conn = Connection(raw)
            schema_rows.ping(conn)
            if conn.execute("SHOW transaction_read_only").fetchone()[0] != "off":
                raise DatabaseUnavailable("the database is read-only")
        finally:
            self.pool().putconn(raw)
        failure = self.write_failures.recent()
        if failure is not None:
            raise DatabaseUnavailable(failure)


def _durable(conn):
    """A COMMIT returns only once it is on disk, whatever the server's default: a 200 is never
    given for a preorder that a crash of the server could lose (synchronous_commit=off would)."""
    conn.execute("SET synchronous_commit = on")


def _bounded(conn, *, unbounded=False):
    """The session's SESSION_SETTINGS; with `unbounded`, no lock or idle timeout (init-db: a second
    one waits for the first's upgrade, which may spend long in Python between statements)."""
    settings = dict(SESSION_SETTINGS)
    if unbounded:
        settings.update(lock_timeout="0", idle_in_transaction_session_timeout="0")
    conn.execute("SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings),
                 [v for item in settings.items() for v in item])
