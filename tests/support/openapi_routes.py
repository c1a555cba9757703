"""The routes the app registers and the operations app/openapi.json describes, in one comparable
form: {(path template with "{}" for each parameter, METHOD)}.

HEAD and OPTIONS are left out on both sides: Flask adds them to every route by itself. The merchant
console's pages (/dashboard/, docs/console.md) and the customers' checkout and payment link pages
(/checkout/, /l/, app/web/checkout.py) are web pages for people, not API operations.
"""
import json
import re

from app.web.docs import DOCUMENT_PATH

HTTP_METHODS = {"get", "put", "post", "delete", "patch", "options", "head", "trace"}
IMPLICIT_METHODS = {"HEAD", "OPTIONS"}

def load_document():
    with open(DOCUMENT_PATH, encoding="utf-8") as f:
        return json.load(f)


def template(path: str) -> str:
    """'/a/<x>/b' (Flask) and '/a/{x}/b' (OpenAPI) both become '/a/{}/b'."""
    return re.sub(r"<[^>]*>|\{[^}]*\}", "{}", path)


def app_operations(app):
    return {
        (template(rule.rule), method)
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static" and not rule.endpoint.startswith(("dashboard.", "checkout."))
        for method in rule.methods - IMPLICIT_METHODS
    }


def document_operations(document):
    return {
        (template(path), method.upper())
        for path, item in document["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }
