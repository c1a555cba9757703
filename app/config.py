"""Settings: their defaults, and their normalisation after every source has been loaded.

Sources, later ones winning (see create_app): these defaults, `instance/config.py`, environment
variables prefixed `FLASK_` (values parsed as JSON when they are JSON), then a test config.
"""
import math
import re
import time
from decimal import Decimal, InvalidOperation

from app.db.interface import HUNG_SESSION_SECONDS
from app.webhooks.schedule import DEFAULT_SCHEDULE, LEASE_MARGIN_SECONDS, parse_schedule

DEFAULTS = {
    # Storage
    "SQLITE_BUSY_TIMEOUT_MS": 30_000,
    "SQLITE_SYNCHRONOUS": "FULL",  # FULL: a 200 is on disk even across a power cut
    # PostgreSQL (DATABASE = postgresql://...): each process's connection pool, how long a request
    # waits for one of its busy connections before a 503, and libpq's connect_timeout (whole
    # seconds, at least 2: how long a server that neither answers nor refuses takes to be given up)
    "POSTGRES_POOL_MIN": 1,
    "POSTGRES_POOL_MAX": 10,
    "POSTGRES_POOL_TIMEOUT_SECONDS": 10,
    "POSTGRES_CONNECT_TIMEOUT_SECONDS": 2,
    # Preorder validation
    "MAX_AMOUNT": "1000000",
    "AMOUNT_DECIMALS": None,  # unset: the process currency's minor-unit digits alone decide
    "METADATA_MAX_BYTES": 10_240,
    "METADATA_MAX_DEPTH": 32,
    "MAX_CONTENT_LENGTH": 64 * 1024,  # whole request body; Flask answers 413 past it
    "IDEMPOTENCY_KEY_MAX_LENGTH": 255,
    "IDEMPOTENCY_TTL_SECONDS": 24 * 3600,
    # Retention: final webhook events (and their attempts) older than this are pruned by the
    # delivery worker (about hourly) and `prune`; 0 keeps them for ever. Processes are never pruned.
    "RETENTION_DAYS": 90,
    # Process lifecycle
    "PROCESS_TTL_SECONDS": 1800,
    # Live payments: how long after a process became final its deposit address is still watched
    # (late payments noticed and reported as payment.received_late)
    "PAYMENT_MONITORING_SECONDS": 86_400,
    # The chain watcher's JSON-RPC calls: seconds to connect, and to wait for an answer (the same
    # as app/evm/rpc.py's TIMEOUT, a client's without the config)
    "CHAIN_RPC_CONNECT_TIMEOUT_SECONDS": 5,
    "CHAIN_RPC_READ_TIMEOUT_SECONDS": 20,
    # Seconds a watcher's lease on a network lasts (renewed each poll): with several watch-payments
    # processes, one polls each network and the others take over within two poll intervals plus
    # this once it dies, hangs or loses the database. At least HUNG_SESSION_SECONDS (10).
    "WATCHER_LEASE_SECONDS": 15,
    # Payments without gas (ERC-3009): the relayer's key file (one hex private key of an account
    # holding only the network's gas coin; read when used, never stored or logged; None: no
    # relayer, the option is not offered), how many transactions it may send per hour, and how many
    # of them for one payer (`from`): one payer cannot fill the cap every payer shares.
    "RELAYER_KEY_FILE": None,
    "RELAYER_MAX_PER_HOUR": 100,
    "RELAYER_MAX_PER_PAYER_PER_HOUR": 10,
    # Relays that reverted on chain (their payer moved the money between the check and the block)
    # within an hour past which payers new to the relayer are refused; those whose relays paid
    # before go on. A reverted relay's payer is refused for a day whatever this says.
    "RELAYER_MAX_REVERTS_PER_HOUR": 10,
    # One deadline over every node call made while serving a web request (the relayer's checks and
    # broadcast, the listing's gas reading): past it the request answers 503 network_unavailable.
    "REQUEST_NODE_DEADLINE_SECONDS": 5,
    # A network whose polls have failed since its last successful one, older than this, is
    # unavailable: hidden from the assets listing, confirm answers 503 (app/domain/health.py)
    "NETWORK_STALE_SECONDS": 60,
    # The service's base URL as customers reach it (https://pay.example.com): each process's
    # checkoutUrl and each payment link's url start with it. Unset: the request's scheme and host.
    "PUBLIC_BASE_URL": None,
    # New processes one client address may make from one payment link in any 60 s
    "LINK_PROCESSES_PER_MINUTE": 10,
    # Rolling a secret key or the webhook secret: hours the old one keeps working beside the new
    # one (0: it stops at once)
    "KEY_ROLL_OVERLAP_HOURS": 24,
    # Webhooks
    "WEBHOOK_TIMEOUT_SECONDS": 10,
    "WEBHOOK_RETRY_SCHEDULE": DEFAULT_SCHEDULE,
    # How long a claimed delivery is a worker's alone: at least WEBHOOK_TIMEOUT_SECONDS +
    # LEASE_MARGIN_SECONDS + 1. Short, so a dead or hung worker's claims are taken over within it
    # plus one idle poll (deliver-webhooks --poll-max): 12 + 1 s by default.
    "WEBHOOK_LEASE_SECONDS": 12,
    # Test-mode webhook URLs may reach loopback addresses (a tester's machine, make run, the demos);
    # 0 in production (deploy/preorder.env). Live mode never; private and link-local never.
    "WEBHOOK_ALLOW_LOOPBACK": True,
    # Demo shop for local testers (off unless asked). Its merchant's keys are read from
    # DEMO_MERCHANT_FILE, default demo-merchant.json beside the SQLite database (app/demo).
    "DEMO_SHOP": False,
    # The demo shop's test wallet: a local node's URL (make demo-onchain sets it); None: no test
    # wallet.
    "DEMO_WALLET_RPC_URL": None,
    # The merchant console (/dashboard/): how long a login lasts, and werkzeug's hash method for new
    # passwords ("scrypt", "scrypt:32768:8:1", "pbkdf2:sha256:600000"; existing hashes keep theirs)
    "DASHBOARD_SESSION_HOURS": 12,
    "DASHBOARD_PASSWORD_HASH": "scrypt",
    # The clock: unix seconds. Tests inject their own so nothing sleeps.
    "CLOCK": time.time,
}


class ConfigError(ValueError):
    """A setting has a value the service cannot run with."""


def normalize(config):
    """Coerce settings that may arrive as JSON numbers or strings; refuse impossible values."""
    try:
        config["MAX_AMOUNT"] = Decimal(str(config["MAX_AMOUNT"]))
    except InvalidOperation:
        raise ConfigError(
            f"MAX_AMOUNT must be a decimal number, got {config['MAX_AMOUNT']!r}") from None
    if not config["MAX_AMOUNT"].is_finite() or config["MAX_AMOUNT"] <= 0:
        raise ConfigError("MAX_AMOUNT must be a positive decimal number")
    if config["AMOUNT_DECIMALS"] in (None, ""):
        config["AMOUNT_DECIMALS"] = None
    else:
        try:
            config["AMOUNT_DECIMALS"] = int(config["AMOUNT_DECIMALS"])
        except (TypeError, ValueError):
            raise ConfigError(f"AMOUNT_DECIMALS must be a whole number, got"
                              f" {config['AMOUNT_DECIMALS']!r}") from None
        if config["AMOUNT_DECIMALS"] < 0:
            raise ConfigError("AMOUNT_DECIMALS must not be negative")
    for name in (
        "METADATA_MAX_BYTES",
        "METADATA_MAX_DEPTH",
        "MAX_CONTENT_LENGTH",
        "IDEMPOTENCY_KEY_MAX_LENGTH",
        "IDEMPOTENCY_TTL_SECONDS",
        "PROCESS_TTL_SECONDS",
        "PAYMENT_MONITORING_SECONDS",
        "SQLITE_BUSY_TIMEOUT_MS",
        "WEBHOOK_LEASE_SECONDS",
        "POSTGRES_POOL_MIN",
        "POSTGRES_POOL_MAX",
        "POSTGRES_CONNECT_TIMEOUT_SECONDS",
        "RETENTION_DAYS",
        "DASHBOARD_SESSION_HOURS",
        "KEY_ROLL_OVERLAP_HOURS",
        "RELAYER_MAX_PER_HOUR",
        "RELAYER_MAX_PER_PAYER_PER_HOUR",
        "RELAYER_MAX_REVERTS_PER_HOUR",
        "NETWORK_STALE_SECONDS",
        "LINK_PROCESSES_PER_MINUTE",
        "WATCHER_LEASE_SECONDS",
    ):
        try:
            config[name] = int(config[name])
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a whole number, got {config[name]!r}") from None
        if config[name] < 0:
            raise ConfigError(f"{name} must not be negative")
    _webhook_settings(config)
    base = config["PUBLIC_BASE_URL"]
    if base:
        if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", str(base)):
            raise ConfigError(f"PUBLIC_BASE_URL must be an http(s) URL without query, got {base!r}")
        config["PUBLIC_BASE_URL"] = str(base).rstrip("/")
    else:
        config["PUBLIC_BASE_URL"] = None
    if config["WATCHER_LEASE_SECONDS"] < HUNG_SESSION_SECONDS:  # see app/db/interface.py
        raise ConfigError(f"WATCHER_LEASE_SECONDS must be at least {HUNG_SESSION_SECONDS}")
    if config["POSTGRES_POOL_MAX"] < max(1, config["POSTGRES_POOL_MIN"]):
        raise ConfigError("POSTGRES_POOL_MAX must be at least 1 and at least POSTGRES_POOL_MIN")
    if config["POSTGRES_CONNECT_TIMEOUT_SECONDS"] < 2:  # libpq: 0 waits for ever, 1 means 2
        raise ConfigError("POSTGRES_CONNECT_TIMEOUT_SECONDS must be at least 2")
    try:
        config["POSTGRES_POOL_TIMEOUT_SECONDS"] = float(config["POSTGRES_POOL_TIMEOUT_SECONDS"])
    except (TypeError, ValueError):
        raise ConfigError("POSTGRES_POOL_TIMEOUT_SECONDS must be a number") from None
    if not 0 < config["POSTGRES_POOL_TIMEOUT_SECONDS"] < math.inf:
        raise ConfigError("POSTGRES_POOL_TIMEOUT_SECONDS must be positive")
    try:
        config["REQUEST_NODE_DEADLINE_SECONDS"] = float(config["REQUEST_NODE_DEADLINE_SECONDS"])
    except (TypeError, ValueError):
        raise ConfigError("REQUEST_NODE_DEADLINE_SECONDS must be a number") from None
    if not 0 < config["REQUEST_NODE_DEADLINE_SECONDS"] <= 20:  # inside gunicorn's 30 s timeout
        raise ConfigError("REQUEST_NODE_DEADLINE_SECONDS must be above 0 and at most 20")
    if str(config["SQLITE_SYNCHRONOUS"]).upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ConfigError("SQLITE_SYNCHRONOUS must be OFF, NORMAL, FULL or EXTRA")
    config["SQLITE_SYNCHRONOUS"] = str(config["SQLITE_SYNCHRONOUS"]).upper()
    config["DEMO_SHOP"] = _flag(config["DEMO_SHOP"])
    config["WEBHOOK_ALLOW_LOOPBACK"] = _flag(config["WEBHOOK_ALLOW_LOOPBACK"])
    method = str(config["DASHBOARD_PASSWORD_HASH"])
    if method.partition(":")[0] not in ("scrypt", "pbkdf2"):
        raise ConfigError("DASHBOARD_PASSWORD_HASH must be a werkzeug scrypt or pbkdf2 method")
    return config


def _webhook_settings(config):
    try:
        timeout = float(config["WEBHOOK_TIMEOUT_SECONDS"])
    except (TypeError, ValueError):
        timeout = math.nan
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(
            "WEBHOOK_TIMEOUT_SECONDS must be a positive number,"
            f" got {config['WEBHOOK_TIMEOUT_SECONDS']!r}"
        )
    config["WEBHOOK_TIMEOUT_SECONDS"] = timeout
    # A lease must outlast the attempt it covers, with at least one second left to start it in.
    least = math.ceil(timeout + LEASE_MARGIN_SECONDS + 1)
    if config["WEBHOOK_LEASE_SECONDS"] < least:
        raise ConfigError(
            f"WEBHOOK_LEASE_SECONDS must be at least {least}"
            f" with WEBHOOK_TIMEOUT_SECONDS = {timeout:g}"
        )
    schedule = config["WEBHOOK_RETRY_SCHEDULE"]
    if isinstance(schedule, int) and not isinstance(schedule, bool):
        schedule = str(schedule)  # FLASK_WEBHOOK_RETRY_SCHEDULE=0 arrives as the JSON number 0
    try:
        schedule = parse_schedule(schedule)
    except ValueError as e:
        raise ConfigError(f"WEBHOOK_RETRY_SCHEDULE: {e}") from None
    if schedule[0] != 0:
        raise ConfigError(
            "WEBHOOK_RETRY_SCHEDULE must start with 0:"
            " an event's first attempt is due when it is written"
        )
    config["WEBHOOK_RETRY_SCHEDULE"] = schedule


def _flag(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
