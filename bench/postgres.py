"""The PostgreSQL server of a benchmark run: the tests' helper (tests/support/postgres_server.py,
Debian's postgresql package, initdb + pg_ctl on loopback), started once on first use, durable
(fsync and synchronous_commit on, as in production), stopped when the run exits."""
import atexit
import sys

from bench.servers import ROOT

_server = None


def database_url():
    """A new empty database on the run's server."""
    global _server
    if _server is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from support.postgres_server import PostgresServer

        _server = PostgresServer(durable=True)
        _server.start()
        atexit.register(_server.destroy)
    return _server.create_database()
