"""Operational endpoints: /healthz, and /metrics for Prometheus.

/metrics has no authentication of its own, like most exporters: gunicorn listens on loopback and
the shipped nginx config (deploy/nginx.conf) answers 404 for it from outside, so only the host's
own Prometheus scrapes it (docs/operations.md). It shows counts only, and per network (labelled
with the operator's network id) its head, lag and state; never a process, merchant or URL.
"""
import logging

from flask import Blueprint, Response, current_app

from app.clock import now
from app.core.jsonutil import dumps_compact
from app.db import DatabaseUnavailable, database_errors, get_db
from app.domain import ops, setup
from app.domain.representation import iso
from app.web.errors import ApiError
from app.web.http import json_response

log = logging.getLogger(__name__)

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    try:
        db = get_db()
        # Answering, with our schema, writable (for SQLite: the file, WAL and index init-db made and
        # this worker opened, not deleted or replaced under us; room on the disk), no recent write
        # failure.
        db.check()
        backlog = ops.outbox_backlog(db, int(now()))
        networks = setup.network_health(db, int(now()), current_app.config["NETWORK_STALE_SECONDS"])
    except DatabaseUnavailable as e:
        # The reason is ours (no path, host or SQL in it): the body says it, for the operator.
        log.warning("healthz: database unavailable: %s", e)
        raise ApiError(503, "unavailable", f"The database cannot serve: {e}.") from None
    except (*database_errors(get_db()), OSError) as e:
        log.warning("healthz: database unavailable: %s", e)
        raise ApiError(503, "unavailable", "The database does not answer.") from None
    return json_response(dumps_compact({
        "status": "ok",
        "outbox": {"pending": backlog.pending, "due": backlog.due,
                   "oldestDueAgeSeconds": backlog.oldest_due_age},
        # each enabled network's state: one that is unavailable does not make the service so
        "networks": {network.id: {"state": state.state, "since": iso(state.since)}
                     for network, state in networks},
    }))


@bp.get("/metrics")
def metrics():
    try:
        snapshot = ops.snapshot(get_db(), int(now()))
        networks = setup.network_health(get_db(), int(now()),
                                        current_app.config["NETWORK_STALE_SECONDS"])
    except (*database_errors(get_db()), OSError):
        raise ApiError(503, "unavailable", "The database does not answer.") from None
    return Response(ops.metrics_text(snapshot, networks, int(now())),
                    content_type="text/plain; version=0.0.4; charset=utf-8")
