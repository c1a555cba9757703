"""Fixtures. Helpers that tests import are in tests/support/helpers.py."""
import json
import os

import pytest
from hypothesis import settings
from support.dbutil import BACKEND
from support.helpers import Api, FakeClock, Shop

from app import create_app
from app.db import init_db
from app.worker import Worker

# Browser fixtures (Debian's Chromium through Playwright); the app served over real HTTP; the
# webhook receivers (`receiver`, `tls`).
pytest_plugins = ["support.browser", "support.live_server", "support.receiver",
                  "support.chain_node"]

# The fixtures through which a test reaches the database of the backend under test.
DATABASE_FIXTURES = {"database", "make_database", "postgres", "postgres_template"}


def pytest_collection_modifyitems(config, items):
    """Each pass runs what differs between backends: the other backend's own tests are left out,
    and the PostgreSQL pass leaves out the tests that reach no database of the backend under test
    (contracts, parsers, the webhook transport, gunicorn and nginx on a SQLite file of their own):
    the SQLite pass runs them once. A test that picks the backend itself is marked both_backends."""
    other = "postgres_only" if BACKEND == "sqlite" else "sqlite_only"
    kept, deselected = [], []
    for item in items:
        once = (BACKEND != "sqlite" and not DATABASE_FIXTURES & set(item.fixturenames)
                and not item.get_closest_marker("both_backends"))
        (deselected if once or item.get_closest_marker(other) else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_report_header(config):
    return f"database backend: {BACKEND} (TEST_DATABASE)"


@pytest.fixture(scope="session")
def postgres():
    """The PostgreSQL server of the session (tests/support/postgres_server.py)."""
    from support.postgres_server import PostgresServer

    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def postgres_template(postgres):
    """A database with the newest schema, copied for each test (CREATE DATABASE ... TEMPLATE)."""
    url = postgres.create_database(name="preorder_template")
    template = create_app({"DATABASE": url})
    with template.app_context():
        init_db()
    template.extensions["db"].close_all()
    return "preorder_template"


@pytest.fixture
def make_database(request, tmp_path):
    """make_database(name, schema=False): a new database of the backend under test, a SQLite path in
    tmp_path (init-db creates the file) or the URL of a new PostgreSQL database, empty or (`schema`)
    with the newest schema already in it. PostgreSQL's are dropped after the test."""
    created = []

    def make(name="test", *, schema=False, backend=None):
        if (backend or BACKEND) == "sqlite":
            return str(tmp_path / f"{name}.sqlite3")
        server = request.getfixturevalue("postgres")
        template = request.getfixturevalue("postgres_template") if schema else "template0"
        created.append(server.create_database(template))
        return created[-1]

    yield make
    for url in created:
        request.getfixturevalue("postgres").drop_database(url)


@pytest.fixture
def database(make_database):
    """The database of the `app` fixture."""
    return make_database("test", schema=True)

# Property tests: modest, repeatable example counts in the suite; `make fuzz` picks "fuzz".
settings.register_profile("suite", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("fuzz", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def app_config():
    """Extra settings for the `app` fixture: a test module or test overrides this fixture."""
    return {}


@pytest.fixture
def app(tmp_path, clock, app_config, database):
    app = create_app({
        "TESTING": True,
        "DATABASE": database,
        "DEMO_MERCHANT_FILE": str(tmp_path / "demo-merchant.json"),
        "CLOCK": clock,
        **app_config,
    })
    with app.app_context():
        init_db()
    yield app
    app.extensions["db"].close_all()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def make_merchant(runner):
    """Create a merchant through the operator CLI, as an operator would; returns its keys."""

    def make(name="Test shop", live=False, webhook_url=None):
        args = ["merchants", "create", "--name", name, "--json"]
        if live:
            args.append("--live")
        if webhook_url:
            args += ["--webhook-url", webhook_url]
        result = runner.invoke(args=args)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)  # a warning about the webhook URL goes to stderr

    return make


@pytest.fixture
def merchant(make_merchant):
    return make_merchant()


@pytest.fixture
def api(client, merchant):
    return Api(client, merchant["secretKey"])


@pytest.fixture
def worker(app):
    """A delivery worker of 4 threads on the app's database (closed after the test)."""
    with Worker.from_app(app, concurrency=4) as w:
        yield w


@pytest.fixture
def make_shop(client, make_merchant):
    """Makes merchants (webhooks to `webhook_url`) that call the API as a shop's backend would."""
    def make(webhook_url=None, live=False):
        keys = make_merchant(webhook_url=webhook_url, live=live)
        return Shop(keys, Api(client, keys["secretKey"]))

    return make


@pytest.fixture
def shop(make_shop, receiver):
    return make_shop(webhook_url=receiver.url("/hooks/preorder"))


def pytest_terminal_summary(terminalreporter):
    from support import fuzz_totals

    summary = fuzz_totals.summary()
    if summary:
        terminalreporter.write_sep("-", "schemathesis totals")
        terminalreporter.write_line(summary)
