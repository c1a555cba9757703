"""GET /openapi.json: the API's OpenAPI 3.1 document, app/openapi.json, the one description of the
API (tests check it against the routes and fuzz the service with it).

The file states the default limits; `load_document` writes the deployment's amount limits
(MAX_AMOUNT, AMOUNT_DECIMALS) into it once at startup, so the served document is true for this
deployment.
"""
import json
import os
from decimal import Decimal

from flask import Blueprint, current_app

from app.http import json_response

DOCUMENT_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "openapi.json")

bp = Blueprint("docs", __name__)


def load_document(config) -> str:
    """The document as served: the file with this deployment's amount limits, as JSON text."""
    with open(DOCUMENT_PATH, encoding="utf-8") as f:
        document = json.load(f)
    amount = document["components"]["schemas"]["Amount"]
    amount["maximum"] = _json_number(config["MAX_AMOUNT"])
    amount["multipleOf"] = _json_number(Decimal(1).scaleb(-config["AMOUNT_DECIMALS"]))
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _json_number(value: Decimal):
    return int(value) if value == value.to_integral_value() else float(value)


@bp.get("/openapi.json")
def openapi_document():
    return json_response(current_app.extensions["openapi_document"])
