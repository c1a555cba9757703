"""GET /openapi.json: the API's OpenAPI 3.1 document, app/openapi.json, the one description of the
API (tests check it against the routes and fuzz the service with it).

The file states the default limits; `load_document` writes the deployment's amount limits
(MAX_AMOUNT, AMOUNT_DECIMALS) into it once at startup, so the served document is true for this
deployment.
"""
import os
from decimal import Decimal

from flask import Blueprint, current_app

from app.core.jsonutil import JSONNumber, dumps_compact, loads
from app.web.http import json_response

DOCUMENT_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "openapi.json")

bp = Blueprint("docs", __name__)


def load_document(config) -> str:
    """The document as served: the file with this deployment's amount limits, as JSON text.
    Read and written with app.core.jsonutil, so the limits go out as exact decimal literals (never
    through a binary float) and every other number as written in the file."""
    with open(DOCUMENT_PATH, "rb") as f:
        document = loads(f.read())
    schemas = document["components"]["schemas"]
    amount = {}
    for key, value in schemas["Amount"].items():
        amount[key] = value
        if key == "maximum":
            amount[key] = JSONNumber(format(config["MAX_AMOUNT"], "f"))
            if config["AMOUNT_DECIMALS"] is not None:  # unset: the currency's (the description)
                step = Decimal(1).scaleb(-config["AMOUNT_DECIMALS"])
                amount["multipleOf"] = JSONNumber(format(step, "f"))
    schemas["Amount"] = amount
    return dumps_compact(document)


@bp.get("/openapi.json")
def openapi_document():
    return json_response(current_app.extensions["openapi_document"])
