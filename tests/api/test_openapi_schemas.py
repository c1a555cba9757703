"""app/openapi.json's request schemas say what app/web/schemas.py enforces: the same fields, the
same required ones, unknown fields refused on both sides, the same enums and the same limits. Each
side is also probed through the marshmallow schema (the documented bounds load, one step past them
does not), and the comparison is shown to catch a drift on either side."""
import copy
import json
from decimal import Decimal

import pytest
from marshmallow import RAISE, Schema, ValidationError, fields, validate

from app import config as settings
from app.core.jsonutil import loads
from app.web.docs import DOCUMENT_PATH
from app.web.schemas import (
    Amount,
    ConfirmSchema,
    Count,
    Currency,
    JSONString,
    Limits,
    LinkSchema,
    ListQuerySchema,
    Metadata,
    PlainText,
    PreorderSchema,
    QueryInteger,
    RefundAmount,
    RefundSchema,
    SandboxPaySchema,
    UtcTime,
    WebUrl,
)

DEFAULT_LIMITS = Limits.from_config(settings.normalize(dict(settings.DEFAULTS)))


@pytest.fixture(scope="module")
def document():
    with open(DOCUMENT_PATH, encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def deref(document, node):
    """The node a {"$ref": "#/a/b"} points to (followed until it is not a reference)."""
    while "$ref" in node:
        target = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def list_query_object(document):
    """The list operation's query parameters, as one object schema (they are not a body)."""
    parameters = document["paths"]["/payment-button/processes"]["get"]["parameters"]
    query = [p for p in parameters if p["in"] == "query"]
    return {
        "type": "object",
        "properties": {p["name"]: p["schema"] for p in query},
        "required": [p["name"] for p in query if p.get("required")],
        "additionalProperties": False,  # an unknown query parameter is 400 validation_error
    }


def request_schemas(document, limits=DEFAULT_LIMITS):
    """(name, the document's object schema, the marshmallow schema that enforces it)."""
    components = document["components"]["schemas"]
    return [
        ("PreorderRequest", components["PreorderRequest"], PreorderSchema(limits)),
        ("SandboxPayRequest", components["SandboxPayRequest"], SandboxPaySchema()),
        ("list query", list_query_object(document), ListQuerySchema()),
        ("ConfirmRequest", components["ConfirmRequest"], ConfirmSchema()),
        ("RefundRequest", components["RefundRequest"], RefundSchema()),
        ("LinkRequest", components["LinkRequest"], LinkSchema(limits)),
    ]


_TYPES = {Amount: "number", RefundAmount: "number", Metadata: "object", QueryInteger: "integer",
          fields.String: "string", JSONString: "string", Currency: "string", PlainText: "string",
          WebUrl: "string"}
# Fields that take null too: the document says anyOf [its type, null].
_NULLABLE = {Count: ("integer", {"minimum": 1, "maximum": 1_000_000_000}), UtcTime: ("string", {})}


def differences(document, doc_schema, schema: Schema):
    """Every way the document's object schema and the marshmallow schema disagree (empty: none)."""
    found = []
    by_key = {f.data_key or name: f for name, f in schema.fields.items()}
    properties = doc_schema["properties"]
    if set(properties) != set(by_key):
        found.append(f"fields: document {sorted(properties)} != marshmallow {sorted(by_key)}")
    required = {key for key, f in by_key.items() if f.required}
    if set(doc_schema.get("required", [])) != required:
        found.append(f"required: document {sorted(doc_schema.get('required', []))}"
                     f" != {sorted(required)}")
    if (doc_schema.get("additionalProperties") is False) != (schema.unknown == RAISE):
        found.append("unknown fields: refused on one side only")
    for key in set(properties) & set(by_key):
        found += [f"{key}: {d}" for d in field_differences(deref(document, properties[key]),
                                                             by_key[key], schema)]
    return found


def field_differences(prop, field, schema):
    if type(field) in _NULLABLE:
        kind, limits = _NULLABLE[type(field)]
        branches = prop.get("anyOf", [])
        typed = [b for b in branches if b.get("type") == kind]
        if len(branches) != 2 or {"type": "null"} not in branches or len(typed) != 1:
            return [f"anyOf {branches} is not [{kind}, null]"]
        documented = {k: typed[0][k] for k in ("minimum", "maximum") if k in typed[0]}
        return [] if documented == limits else [f"limits: document {documented} != {limits}"]
    found = []
    kind = next((t for cls, t in _TYPES.items() if type(field) is cls), None)
    if kind is None:
        return [f"no rule in this test for {type(field).__name__}: add one"]
    if prop.get("type") != kind:
        found.append(f"type {prop.get('type')!r} != {kind!r}")
    one_of = [v for v in field.validators if isinstance(v, validate.OneOf)]
    choices = list(one_of[0].choices) if one_of else None
    if prop.get("enum") != choices:
        found.append(f"enum {prop.get('enum')} != {choices}")
    ranges = [v for v in field.validators if isinstance(v, validate.Range)]
    lengths = [v for v in field.validators if isinstance(v, validate.Length)]
    if isinstance(field, Amount):
        limits = schema.limits
        expected = {"exclusiveMinimum": 0, "maximum": limits.max_amount}
        if limits.amount_decimals is not None:  # else the currency's places (the description)
            expected["multipleOf"] = Decimal(1).scaleb(-limits.amount_decimals)
    elif isinstance(field, RefundAmount):
        # its other bounds depend on the payment (app/domain/refunds.py)
        expected = {"exclusiveMinimum": 0}
    elif isinstance(field, Metadata):
        limits = schema.limits
        text = prop.get("description", "")
        if f"at most {limits.metadata_max_bytes:,} bytes" not in text:
            found.append(f"description does not say at most {limits.metadata_max_bytes:,} bytes")
        if f"nest at most {limits.metadata_max_depth} levels" not in text:
            found.append("description does not say nest at most"
                         f" {limits.metadata_max_depth} levels")
        expected = {}
    else:
        expected = {}
        for r in ranges:
            if r.min is not None:
                expected["minimum" if r.min_inclusive else "exclusiveMinimum"] = r.min
            if r.max is not None:
                expected["maximum" if r.max_inclusive else "exclusiveMaximum"] = r.max
        for length in lengths:
            if length.min is not None:
                expected["minLength"] = length.min
            if length.max is not None:
                expected["maxLength"] = length.max
    documented = {k: prop[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                        "multipleOf", "minLength", "maxLength") if k in prop}
    if documented != expected:
        found.append(f"limits: document {documented} != marshmallow {expected}")
    return found


def test_the_document_and_the_marshmallow_schemas_agree(document):
    for name, doc_schema, schema in request_schemas(document):
        assert differences(document, doc_schema, schema) == [], name


def accepts(schema, data):
    try:
        schema.load(data)
        return True
    except ValidationError:
        return False


def test_the_documented_bounds_hold_in_the_marshmallow_schemas(document):
    components = document["components"]["schemas"]
    preorder = PreorderSchema(DEFAULT_LIMITS)
    amount = components["Amount"]
    # the currency's places: checked with the process
    step, top = Decimal("0.01"), amount["maximum"]

    def number(value):
        return loads(str(value).encode())

    assert accepts(preorder, {"amount": number(top)})
    assert not accepts(preorder, {"amount": number(top + step)})
    assert accepts(preorder, {"amount": number(step)})
    assert "multipleOf" not in amount  # AMOUNT_DECIMALS unset by default
    assert accepts(preorder, {"amount": number(1), "currency": "KWD"})
    assert not accepts(preorder, {"amount": number(1), "currency": "EURO"})
    assert not accepts(preorder, {"amount": number(amount["exclusiveMinimum"])})
    # additionalProperties
    assert not accepts(preorder, {"amount": number(1), "ammount": number(1)})
    sandbox = SandboxPaySchema()
    for outcome in components["SandboxPayRequest"]["properties"]["outcome"]["enum"]:
        assert accepts(sandbox, {"outcome": outcome})
    assert not accepts(sandbox, {"outcome": "refund"})
    query = list_query_object(document)["properties"]
    listing = ListQuerySchema()
    limit = query["limit"]
    assert accepts(listing, {"limit": str(limit["minimum"])})
    assert accepts(listing, {"limit": str(limit["maximum"])})
    assert not accepts(listing, {"limit": str(limit["minimum"] - 1)})
    assert not accepts(listing, {"limit": str(limit["maximum"] + 1)})
    for status in deref(document, query["status"])["enum"]:
        assert accepts(listing, {"status": status})
    confirm = ConfirmSchema()
    choice = components["ConfirmRequest"]["properties"]
    for key, other in (("assetId", "networkId"), ("networkId", "assetId")):
        shortest, longest = choice[key]["minLength"], choice[key]["maxLength"]
        assert accepts(confirm, {key: "a" * shortest, other: "x"})
        assert accepts(confirm, {key: "a" * longest, other: "x"})
        assert not accepts(confirm, {key: "a" * (shortest - 1), other: "x"})
        assert not accepts(confirm, {key: "a" * (longest + 1), other: "x"})
        assert not accepts(confirm, {other: "x"})  # required
    # additionalProperties
    assert not accepts(confirm, {"assetId": "x", "networkId": "y", "address": "z"})
    refund = RefundSchema()
    fields_ = components["RefundRequest"]["properties"]
    address = "0x" + "a" * (fields_["address"]["minLength"] - 2)
    assert accepts(refund, {"amount": number(1), "address": address,
                            "reason": "r" * fields_["reason"]["maxLength"]})
    assert not accepts(refund, {"amount": number(1), "address": address,
                                "reason": "r" * (fields_["reason"]["maxLength"] + 1)})
    assert not accepts(refund, {"amount": number(1), "address": address + "a"})
    assert not accepts(refund, {"amount": number(1)})  # required
    assert not accepts(refund, {"amount": number(1), "address": address, "memo": "x"})


def test_a_drift_on_either_side_is_caught(document):
    """The comparison is not vacuous: each of these changes is reported."""
    def drifted(edit):
        changed = copy.deepcopy(document)
        edit(changed["components"]["schemas"])
        return changed

    doc_drifts = [
        lambda s: s["SandboxPayRequest"]["properties"]["outcome"]["enum"].append("refund"),
        lambda s: s["SandboxPayRequest"].pop("additionalProperties"),
        lambda s: s["PreorderRequest"]["required"].append("metadata"),
        lambda s: s["PreorderRequest"]["properties"].pop("metadata"),
        lambda s: s["Amount"].__setitem__("maximum", Decimal("999999")),
        lambda s: s["Amount"].__setitem__("multipleOf", Decimal("0.001")),
        lambda s: s["ProcessStatus"]["enum"].pop(),
        lambda s: s["ConfirmRequest"]["properties"]["assetId"].__setitem__("maxLength", 128),
        lambda s: s["ConfirmRequest"]["properties"]["networkId"].__setitem__("type", "integer"),
        lambda s: s["ConfirmRequest"]["required"].remove("networkId"),
        lambda s: s["RefundRequest"]["properties"]["reason"].__setitem__("maxLength", 1000),
        lambda s: s["RefundRequest"]["required"].remove("address"),
    ]
    for edit in doc_drifts:
        changed = drifted(edit)
        assert any(differences(changed, d, m) for _, d, m in request_schemas(changed))

    class MoreOutcomes(SandboxPaySchema):
        outcome = fields.String(required=True, validate=validate.OneOf(("success", "failure", "x")))

    class ExtraField(SandboxPaySchema):
        note = fields.String()

    class LongerIds(ConfirmSchema):
        assetId = JSONString(required=True, validate=validate.Length(min=1, max=128))

    class LongerPages(ListQuerySchema):
        limit = QueryInteger(validate=validate.Range(min=1, max=500))

    components = document["components"]["schemas"]
    assert differences(document, components["SandboxPayRequest"], MoreOutcomes())
    assert differences(document, components["SandboxPayRequest"], ExtraField())
    assert differences(document, list_query_object(document), LongerPages())
    assert differences(document, components["ConfirmRequest"], LongerIds())
    wider = Limits(DEFAULT_LIMITS.max_amount * 2, 3, DEFAULT_LIMITS.metadata_max_bytes * 2,
                   DEFAULT_LIMITS.metadata_max_depth + 1)
    assert len(differences(document, components["PreorderRequest"], PreorderSchema(wider))) == 3


def test_the_document_accepts_any_charset_as_the_service_does(document, api):
    # The service decodes every JSON body as UTF-8 whatever the charset label says (the contract,
    # tests/api/test_hostile_input.py); the document must not promise a 415 for another charset.
    texts = [document["info"]["description"],
             document["components"]["responses"]["UnsupportedMediaType"]["description"]]
    assert all("`charset=utf-8`" not in text for text in texts)
    assert "a `charset` parameter is accepted whatever it says" in texts[0]
    response = api.preorder_raw('{"amount": 5}',
                                content_type="application/json; charset=iso-8859-1")
    assert response.status_code == 200
