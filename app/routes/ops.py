"""Operational endpoints."""
import sqlite3

from flask import Blueprint

from app.db import get_db
from app.errors import ApiError
from app.http import json_response

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    try:
        get_db().ping()
    except (sqlite3.Error, OSError):
        raise ApiError(503, "unavailable", "The database does not answer.") from None
    return json_response('{"status":"ok"}')
