"""Operational endpoints."""
import logging
import sqlite3

from flask import Blueprint

from app.db import get_db
from app.errors import ApiError
from app.http import json_response

log = logging.getLogger(__name__)

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    try:
        # Present, made by init-db (not deleted or replaced under us), answering, writable.
        get_db().check()
    except (sqlite3.Error, OSError) as e:
        log.warning("healthz: database unavailable: %s", e)
        raise ApiError(503, "unavailable", "The database does not answer.") from None
    return json_response('{"status":"ok"}')
