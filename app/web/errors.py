"""The one JSON error envelope: {"code", "message", "errors"?} on every non-2xx response."""
import logging

from flask import Response, current_app, request
from werkzeug.exceptions import HTTPException

from app.chain import relayer
from app.core.jsonutil import dumps_compact
from app.db import database_errors, get_db, is_unavailable
from app.domain import endpoints, health, links, payments, processes, rates, refunds, unexpected

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status, code, message, errors=None, headers=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.errors, self.headers = errors, headers


def validation_error(errors):
    """400 validation_error from a {field: [messages]} map; message lists them all."""
    message = " ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items())
    return ApiError(400, "validation_error", message, errors=errors)


def error_response(status, code, message, errors=None, headers=None):
    body = {"code": code, "message": message}
    if errors:
        body["errors"] = errors
    response = Response(dumps_compact(body), status=status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


# Werkzeug's own exceptions, by status: our stable code and a message a merchant can act on.
_HTTP_CODES = {
    400: ("validation_error", None),
    404: ("not_found", "No such resource."),
    405: ("method_not_allowed", None),
    413: ("payload_too_large", None),
    415: ("unsupported_media_type", "Content-Type must be application/json."),
    429: ("rate_limited", "Too many requests."),
}


def _console_page(e):
    """The merchant console answers its errors with pages (app/console/security.py), not JSON."""
    hook = current_app.extensions.get("html_errors")
    return hook(e) if hook else None


def _http_error(e: HTTPException):
    page = _console_page(e)
    if page is not None:
        return page
    code, message = _HTTP_CODES.get(e.code, (None, None))
    headers = {}
    if e.code == 405:
        allowed = e.valid_methods or []
        message = f"Method {request.method} is not allowed here; allowed: {', '.join(allowed)}."
        headers["Allow"] = ", ".join(allowed)
    elif e.code == 413:
        limit = request.max_content_length
        message = (f"Request body is larger than {limit} bytes." if limit
                   else "Request body is too large.")
    if code is None:
        code = (e.name or "error").lower().replace(" ", "_").replace("'", "")
    return error_response(e.code or 500, code, message or e.description or e.name, headers=headers)


def _api_error(e: ApiError):
    return error_response(e.status, e.code, e.message, e.errors, e.headers)


def _unexpected(e: Exception):
    # The traceback goes to the log (it holds code lines, not request data); the body says nothing.
    log.exception("unhandled error on %s %s", request.method, request.path)
    return _console_page(e) or error_response(
        500, "internal_error", "An internal error occurred; it has been logged.")


# Seconds a client is asked to wait before retrying when the database cannot serve (an operator has
# to act: a few seconds keeps retries from piling up while a restart or a remount is under way).
RETRY_AFTER_SECONDS = 5


def _database_error(e: Exception):
    """A database that cannot serve (gone, replaced, read-only, I/O error, locked past the busy
    timeout, a server stopped or unreachable) is 503 service_unavailable with Retry-After; any
    other database error is a bug (500)."""
    if not is_unavailable(get_db(), e):
        return _unexpected(e)
    # The operator's problem, not the client's and not a bug: one ERROR line, no traceback.
    log.error("database unavailable on %s %s: %s", request.method, request.path, e)
    page = _console_page(e)
    if page is not None:
        return page[0], 503, {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return error_response(
        503, "service_unavailable", "The service cannot reach its database; try again later.",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def _domain_errors():
    """Errors raised below the HTTP layer, and the API error each one is."""
    return {
        payments.PaymentMethodUnavailable: lambda e: error_response(
            409, "payment_method_unavailable", str(e)
        ),
        payments.NetworkUnavailable: lambda e: error_response(
            503, "network_unavailable", str(e), {"networkId": [str(e)]},
            headers={"Retry-After": str(health.RETRY_AFTER_SECONDS)},
        ),
        rates.RateUnavailable: lambda e: error_response(
            503, "rate_unavailable", str(e), {"assetId": [str(e)]},
            headers={"Retry-After": str(rates.RETRY_AFTER_SECONDS)},
        ),
        relayer.RelayUnavailable: lambda e: error_response(
            503, "network_unavailable", str(e), headers={"Retry-After": relayer.RETRY_AFTER}),
        relayer.TooManyRefusals: lambda e: error_response(
            429, "rate_limited", str(e), headers={"Retry-After": str(e.retry_after)}),
        payments.ChoiceError: lambda e: error_response(
            400, "validation_error", str(e), e.errors
        ),
        processes.InvalidAmount: lambda e: error_response(
            400, "validation_error", str(e), e.errors),
        processes.InvalidUrl: lambda e: error_response(400, "validation_error", str(e), e.errors),
        links.LinkError: lambda e: error_response(400, "validation_error", str(e), e.errors),
        links.LinkNotFound: lambda e: error_response(404, "not_found", "No such link."),
        endpoints.EndpointNotFound: lambda e: error_response(
            404, "not_found", "No such webhook endpoint."),
        endpoints.EndpointLimit: lambda e: error_response(409, "endpoint_limit", str(e)),
        endpoints.EndpointError: lambda e: error_response(
            400, "validation_error", str(e), e.errors),
        processes.ProcessNotFound: lambda e: error_response(404, "not_found", "No such process."),
        refunds.RefundNotFound: lambda e: error_response(404, "not_found", "No such refund."),
        unexpected.TransferNotFound: lambda e: error_response(
            404, "not_found", "No such unexpected transfer of this process."),
        refunds.RefundError: lambda e: error_response(400, "validation_error", str(e), e.errors),
        processes.InvalidState: lambda e: error_response(409, "invalid_state", str(e)),
        processes.IdempotencyKeyReused: lambda e: error_response(
            409, "idempotency_key_reused", str(e)
        ),
    }


def init_app(app, db):
    """The handlers, `db`'s failures among them (the app's database, opened first)."""
    app.register_error_handler(ApiError, _api_error)
    for exc_class, handler in _domain_errors().items():
        app.register_error_handler(exc_class, handler)
    for error_class in database_errors(db):
        app.register_error_handler(error_class, _database_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
