"""Settings: defaults, then instance/config.py, then FLASK_ environment variables."""
from decimal import Decimal

import pytest

from app import create_app
from app.config import ConfigError


@pytest.fixture
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("FLASK_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults(clean_env):
    app = create_app()
    assert app.config["DATABASE"].endswith("instance/preorder.sqlite3")
    assert app.config["MAX_AMOUNT"] == Decimal("1000000")
    assert app.config["AMOUNT_DECIMALS"] is None  # the currency decides
    assert app.config["METADATA_MAX_BYTES"] == 10_240
    assert app.config["PROCESS_TTL_SECONDS"] == 1800
    assert app.config["KEY_ROLL_OVERLAP_HOURS"] == 24
    assert app.config["DEMO_SHOP"] is False
    assert app.config["WEBHOOK_RETRY_SCHEDULE"] == (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    assert app.config["DEMO_MERCHANT_FILE"].endswith("instance/demo-merchant.json")


def test_environment_overrides(clean_env, tmp_path):
    clean_env.setenv("FLASK_DATABASE", str(tmp_path / "x.sqlite3"))
    clean_env.setenv("FLASK_MAX_AMOUNT", "2500.50")
    clean_env.setenv("FLASK_AMOUNT_DECIMALS", "3")
    clean_env.setenv("FLASK_PROCESS_TTL_SECONDS", "60")
    clean_env.setenv("FLASK_DEMO_SHOP", "1")
    clean_env.setenv("FLASK_DEMO_MERCHANT_FILE", str(tmp_path / "demo.json"))
    app = create_app()
    assert app.config["DATABASE"] == str(tmp_path / "x.sqlite3")
    assert app.config["MAX_AMOUNT"] == Decimal("2500.50")
    assert app.config["AMOUNT_DECIMALS"] == 3
    assert app.config["PROCESS_TTL_SECONDS"] == 60
    assert app.config["DEMO_SHOP"] is True
    assert app.config["DEMO_MERCHANT_FILE"] == str(tmp_path / "demo.json")


def test_instance_config_then_environment(clean_env, tmp_path):
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "config.py").write_text("MAX_AMOUNT = '10'\nAMOUNT_DECIMALS = 0\n")
    clean_env.setenv("FLASK_AMOUNT_DECIMALS", "1")
    from flask import Flask

    original = Flask.__init__

    def with_instance(self, *args, **kwargs):
        kwargs["instance_path"] = str(instance)
        original(self, *args, **kwargs)

    clean_env.setattr(Flask, "__init__", with_instance)
    app = create_app()
    assert app.config["MAX_AMOUNT"] == Decimal("10")
    assert app.config["AMOUNT_DECIMALS"] == 1


@pytest.mark.parametrize(
    "name,value",
    [("MAX_AMOUNT", "lots"), ("MAX_AMOUNT", "0"), ("AMOUNT_DECIMALS", "-1"),
     ("SQLITE_SYNCHRONOUS", "SOMETIMES"),
     ("POSTGRES_CONNECT_TIMEOUT_SECONDS", "0"), ("POSTGRES_CONNECT_TIMEOUT_SECONDS", "1"),
     ("POSTGRES_CONNECT_TIMEOUT_SECONDS", "soon"), ("KEY_ROLL_OVERLAP_HOURS", "-1"),
     ("KEY_ROLL_OVERLAP_HOURS", "a day")],
)
def test_impossible_settings_are_refused_at_startup(clean_env, name, value):
    clean_env.setenv(f"FLASK_{name}", value)
    with pytest.raises(ConfigError):
        create_app()
