"""The service's time: unix seconds from the injectable CLOCK setting (tests pass a fake one)."""
from flask import current_app


def now() -> int:
    return int(current_app.config["CLOCK"]())
