"""A real PostgreSQL server for the tests: Debian's `postgresql` package, a cluster made with initdb
in a temporary directory and started with pg_ctl on a free loopback port. PostgreSQL refuses to run
as root, so as root its commands run as the `postgres` user (runuser). A missing package is a test
failure, never a skip (.ci/run installs it).

Durability is switched off (fsync, synchronous_commit) unless `durable`: the tests check what the
service commits, not the disk; it makes CREATE DATABASE and every commit cheap. A test that stops
the server as a crash (`stop("immediate")`) and the benchmarks ask for `durable`: a commit is
acknowledged only once its WAL is on disk, as on a production server.
"""
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time

import psycopg


def _bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version_key)
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed: apt-get install postgresql (see .ci/run)"
        )
    return path


def _version_key(path):
    try:
        return int(path.split("/")[4])
    except (IndexError, ValueError):
        return 0


def _free_port():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, durable=False):
        self.durable = durable
        self.root = tempfile.mkdtemp(prefix="preorder-pg-")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "server.log")
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, "postgres", "postgres")
        self._run(_bin("initdb"), "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--no-sync", "--locale=C.UTF-8")
        self._counter = 0

    def _run(self, *args, check=True):
        command = list(args)
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, cwd=self.root)

    def start(self):
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}"
            " -c max_connections=300 -c shared_buffers=64MB"
        )
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        result = self._run(_bin("pg_ctl"), "-D", self.data, "-l", self.log, "-o", options, "-w",
                           "-t", "60", "start", check=False)
        if result.returncode != 0:
            with open(self.log) as f:
                raise RuntimeError(f"PostgreSQL did not start: {result.stderr}\n{f.read()[-2000:]}")

    def stop(self, mode="fast"):
        self._run(_bin("pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def url(self, dbname="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def admin(self):
        return psycopg.connect(self.url(), autocommit=True)

    def create_database(self, template="template0", name=None):
        """A new database (a copy of `template`); returns its URL."""
        if name is None:
            self._counter += 1
            name = f"t{os.getpid()}_{self._counter}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        return self.url(name)

    def drop_database(self, url):
        name = url.rsplit("/", 1)[1]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_until_up(self, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.admin():
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def destroy(self):
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
