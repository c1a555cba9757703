"""Settings: their defaults, and their normalisation after every source has been loaded.

Sources, later ones winning (see create_app): these defaults, `instance/config.py`, environment
variables prefixed `FLASK_` (values parsed as JSON when they are JSON), then a test config.
"""
import time
from decimal import Decimal, InvalidOperation

DEFAULTS = {
    # Storage
    "SQLITE_BUSY_TIMEOUT_MS": 30_000,
    "SQLITE_SYNCHRONOUS": "FULL",  # FULL: a 200 is on disk even across a power cut
    # Preorder validation
    "MAX_AMOUNT": "1000000",
    "AMOUNT_DECIMALS": 2,
    "METADATA_MAX_BYTES": 10_240,
    "METADATA_MAX_DEPTH": 32,
    "MAX_CONTENT_LENGTH": 64 * 1024,  # whole request body; Flask answers 413 past it
    "IDEMPOTENCY_KEY_MAX_LENGTH": 255,
    "IDEMPOTENCY_TTL_SECONDS": 24 * 3600,
    # Process lifecycle
    "PROCESS_TTL_SECONDS": 1800,
    # Webhooks
    "WEBHOOK_TIMEOUT_SECONDS": 10,
    "WEBHOOK_RETRY_SCHEDULE": "0,5,300,1800,7200,18000,36000,36000",
    "WEBHOOK_LEASE_SECONDS": 60,
    # Demo shop for local testers (off unless asked)
    "DEMO_SHOP": False,
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
        raise ConfigError(f"MAX_AMOUNT must be a decimal number, got {config['MAX_AMOUNT']!r}")
    if not config["MAX_AMOUNT"].is_finite() or config["MAX_AMOUNT"] <= 0:
        raise ConfigError("MAX_AMOUNT must be a positive decimal number")
    for name in (
        "AMOUNT_DECIMALS",
        "METADATA_MAX_BYTES",
        "METADATA_MAX_DEPTH",
        "MAX_CONTENT_LENGTH",
        "IDEMPOTENCY_KEY_MAX_LENGTH",
        "IDEMPOTENCY_TTL_SECONDS",
        "PROCESS_TTL_SECONDS",
        "SQLITE_BUSY_TIMEOUT_MS",
        "WEBHOOK_LEASE_SECONDS",
    ):
        try:
            config[name] = int(config[name])
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a whole number, got {config[name]!r}")
        if config[name] < 0:
            raise ConfigError(f"{name} must not be negative")
    config["WEBHOOK_TIMEOUT_SECONDS"] = float(config["WEBHOOK_TIMEOUT_SECONDS"])
    if str(config["SQLITE_SYNCHRONOUS"]).upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ConfigError("SQLITE_SYNCHRONOUS must be OFF, NORMAL, FULL or EXTRA")
    config["SQLITE_SYNCHRONOUS"] = str(config["SQLITE_SYNCHRONOUS"]).upper()
    config["DEMO_SHOP"] = _flag(config["DEMO_SHOP"])
    return config


def _flag(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
