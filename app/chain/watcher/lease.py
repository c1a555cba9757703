"""One active watcher per network: a lease row per network (app/data/leases.py), held by one
`watch-payments` process, renewed at each of its polls, taken over by another once it has expired.

Why a row and not a PostgreSQL advisory lock: an advisory lock lives as long as its session, and a
hung process (SIGSTOP, a frozen VM) keeps its session open, so its lock holds and it could still
write when it wakes. The row is checked and renewed inside every transaction a poll writes
(`Fenced`): a holder that wakes after another took the row over finds another owner there and writes
nothing (LeaseLost, rolled back). On PostgreSQL that check locks the row until the transaction ends,
so a takeover waits for the holder's writes under way, and a hung holder's transaction is ended by
the server's session timeouts (app/db/postgres.py), which are shorter than the lease. It works the
same on SQLite, where it keeps one watcher per network on one host.

A standby makes no JSON-RPC call for a network it does not hold: it tries to take the lease every
poll interval, so it takes over within a poll interval of the lease's expiry.
"""
import os
import secrets
import socket
from contextlib import contextmanager

from app.data import leases as lease_rows


class LeaseLost(Exception):
    """Another watcher holds the network's lease now: nothing of this transaction was written."""


def owner_token() -> str:
    """A token naming this process in the lease rows and the logs: host, pid and a random part (a
    pid may be reused, on another host too)."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


class Lease:
    """A network's lease as one watcher process sees it."""

    def __init__(self, db, network_id, owner, seconds):
        self.db, self.network_id, self.owner, self.seconds = db, network_id, owner, seconds

    def take(self) -> bool:
        """Renewed or taken, in a short transaction of its own; False: another watcher holds it (or
        is writing under it now)."""
        try:
            with self.db.transaction() as conn:
                return lease_rows.take(conn, self.network_id, self.owner, self.seconds)
        except Exception as e:
            if getattr(e, "sqlstate", None) == lease_rows.LOCK_NOT_AVAILABLE:
                return False  # its holder's transaction holds the row (or a hung one, for now)
            raise

    def renew(self, conn):
        """In a poll's transaction, before its writes: LeaseLost unless this process holds it."""
        if not lease_rows.renew(conn, self.network_id, self.owner, self.seconds):
            raise LeaseLost(f"another watcher holds network {self.network_id} now")

    def holder(self):
        """(owner, seconds left) of whoever holds it, for the log; None: nobody."""
        return lease_rows.holder(self.db.connection(), self.network_id)

    def release(self):
        with self.db.transaction() as conn:
            lease_rows.release(conn, self.network_id, self.owner)


class Fenced:
    """The database as a network's poll writes to it: every transaction renews the lease first, in
    that same transaction, or raises LeaseLost with nothing written. Everything else (reads, the
    connection's release, the dialect) is the database's own."""

    def __init__(self, db, lease):
        self._db, self.lease = db, lease

    def __getattr__(self, name):
        return getattr(self._db, name)

    @contextmanager
    def transaction(self, **options):
        with self._db.transaction(**options) as conn:
            self.lease.renew(conn)
            yield conn
