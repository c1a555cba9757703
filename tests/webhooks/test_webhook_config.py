"""Webhook settings: parsed and checked once, when the app is created."""
import pytest

from app import create_app
from app.config import ConfigError


def make(tmp_path, **settings):
    return create_app({"TESTING": True, "DATABASE": str(tmp_path / "c.sqlite3"), **settings}).config


@pytest.mark.parametrize("value, parsed", [
    ("0,5,300,1800,7200,18000,36000,36000", (0, 5, 300, 1800, 7200, 18000, 36000, 36000)),
    (" 0 , 5 ,300", (0, 5, 300)),
    ([0, 60], (0, 60)),
    (0, (0,)),
])
def test_retry_schedule_is_parsed(tmp_path, value, parsed):
    assert make(tmp_path, WEBHOOK_RETRY_SCHEDULE=value)["WEBHOOK_RETRY_SCHEDULE"] == parsed


@pytest.mark.parametrize("env, parsed", [
    ("0,5,300", (0, 5, 300)),   # not JSON: kept as a string, then parsed
    ("[0, 7]", (0, 7)),         # JSON list
    ("0", (0,)),                # JSON number
])
def test_retry_schedule_from_the_environment(tmp_path, monkeypatch, env, parsed):
    monkeypatch.setenv("FLASK_DATABASE", str(tmp_path / "env.sqlite3"))
    monkeypatch.setenv("FLASK_WEBHOOK_RETRY_SCHEDULE", env)
    assert create_app().config["WEBHOOK_RETRY_SCHEDULE"] == parsed


@pytest.mark.parametrize("settings, message", [
    ({"WEBHOOK_RETRY_SCHEDULE": ""}, "WEBHOOK_RETRY_SCHEDULE: retry schedule is empty"),
    ({"WEBHOOK_RETRY_SCHEDULE": "0,x"},
     "WEBHOOK_RETRY_SCHEDULE: retry schedule entry 'x' is not a whole number of seconds >= 0"),
    ({"WEBHOOK_RETRY_SCHEDULE": [0, -5]},
     "WEBHOOK_RETRY_SCHEDULE: retry schedule entry -5 is not a whole number of seconds >= 0"),
    ({"WEBHOOK_RETRY_SCHEDULE": "5,10"},
     "WEBHOOK_RETRY_SCHEDULE must start with 0: an event's first attempt is due when it is"
     " written"),
    ({"WEBHOOK_TIMEOUT_SECONDS": 10, "WEBHOOK_LEASE_SECONDS": 11},
     "WEBHOOK_LEASE_SECONDS must be at least 12 with WEBHOOK_TIMEOUT_SECONDS = 10"),
    ({"WEBHOOK_TIMEOUT_SECONDS": 0.3, "WEBHOOK_LEASE_SECONDS": 2},
     "WEBHOOK_LEASE_SECONDS must be at least 3 with WEBHOOK_TIMEOUT_SECONDS = 0.3"),
    ({"WEBHOOK_TIMEOUT_SECONDS": 0}, "WEBHOOK_TIMEOUT_SECONDS must be a positive number, got 0"),
    ({"WEBHOOK_TIMEOUT_SECONDS": "soon"},
     "WEBHOOK_TIMEOUT_SECONDS must be a positive number, got 'soon'"),
])
def test_impossible_webhook_settings_are_refused(tmp_path, settings, message):
    with pytest.raises(ConfigError) as caught:
        make(tmp_path, **settings)
    assert str(caught.value) == message


def test_smallest_lease_for_a_timeout_is_accepted(tmp_path):
    config = make(tmp_path, WEBHOOK_TIMEOUT_SECONDS="0.3", WEBHOOK_LEASE_SECONDS="3")
    assert (config["WEBHOOK_TIMEOUT_SECONDS"], config["WEBHOOK_LEASE_SECONDS"]) == (0.3, 3)
