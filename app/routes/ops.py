"""Operational endpoints."""
import logging

from flask import Blueprint

from app.db import database_errors, get_db
from app.errors import ApiError
from app.http import json_response

log = logging.getLogger(__name__)

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    try:
        # Answering, with our schema, writable (for SQLite: the file init-db made, not deleted or
        # replaced under us).
        get_db().check()
    except (*database_errors(), OSError) as e:
        log.warning("healthz: database unavailable: %s", e)
        raise ApiError(503, "unavailable", "The database does not answer.") from None
    return json_response('{"status":"ok"}')
