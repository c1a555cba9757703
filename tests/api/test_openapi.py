"""app/openapi.json: a valid OpenAPI 3.1 document, served at /openapi.json, describing exactly the
routes the app registers (no drift in either direction)."""
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator
from support.helpers import assert_error
from support.openapi_routes import app_operations, document_operations, load_document

BUTTON_API = {
    "/payment-button/process/{processId}/public",
    "/payment-button/process/{processId}/qr.svg",
    "/payment-button/process/{processId}/sandbox/pay",
    "/payment-button/process/{processId}/confirm",
    "/payment-button/process/{processId}/authorization",
    "/payment-button/assets",
    "/payment-button/button.js",
}


@pytest.fixture(scope="module")
def document():
    return load_document()


def test_document_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1.")
    errors = [f"{list(e.path)}: {e.message}"
              for e in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_served_document_is_the_file(client, document):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == document


def test_served_document_carries_this_deployments_amount_limits(tmp_path, clock):
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "x.sqlite3"), "CLOCK": clock,
                      "MAX_AMOUNT": "50.5", "AMOUNT_DECIMALS": 3})
    amount = app.test_client().get("/openapi.json").get_json()["components"]["schemas"]["Amount"]
    assert (amount["maximum"], amount["multipleOf"], amount["exclusiveMinimum"]) == (50.5, 0.001, 0)


@pytest.mark.parametrize("max_amount, decimals, literals", [
    ("12345678901234567.89", 2, '"maximum":12345678901234567.89,"multipleOf":0.01'),  # 19 digits
    ("1E+6", 0, '"maximum":1000000,"multipleOf":1'),
])
def test_served_amount_limits_are_exact_decimal_literals(tmp_path, clock, max_amount, decimals,
                                                          literals):
    # Through a binary float the first maximum would be served as 12345678901234568.
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "x.sqlite3"), "CLOCK": clock,
                      "MAX_AMOUNT": max_amount, "AMOUNT_DECIMALS": decimals})
    assert literals in app.test_client().get("/openapi.json").get_data(as_text=True)


def test_every_route_is_documented(app, document):
    undocumented = app_operations(app) - document_operations(document)
    assert undocumented == set(), "routes missing from app/openapi.json"


def test_every_documented_operation_is_routed(app, document):
    unrouted = document_operations(document) - app_operations(app)
    assert unrouted == set(), "documented but not routed"


def test_button_api_is_documented(document):
    assert BUTTON_API <= set(document["paths"])
    paths = document["paths"]
    assert set(paths["/payment-button/process/{processId}/public"]) == {"parameters", "get"}
    assert set(paths["/payment-button/process/{processId}/sandbox/pay"]) == {"parameters", "post"}
    assert set(paths["/payment-button/process/{processId}/confirm"]) == {"parameters", "post"}
    assert set(document["paths"]["/payment-button/assets"]) == {"get"}
    script = document["paths"]["/payment-button/button.js"]["get"]["responses"]["200"]
    assert list(script["content"]) == ["text/javascript"]
    qr = document["paths"]["/payment-button/process/{processId}/qr.svg"]["get"]["responses"]["200"]
    assert list(qr["content"]) == ["image/svg+xml"]


def test_security_schemes(document):
    schemes = document["components"]["securitySchemes"]
    assert {name: (s["type"], s["in"], s["name"]) for name, s in schemes.items()} == {
        "secretKey": ("apiKey", "header", "x-secret-key"),
        "publicKey": ("apiKey", "header", "x-public-key"),
    }
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            expected = (
                [{"publicKey": []}] if path in BUTTON_API and path != "/payment-button/button.js"
                else [{"secretKey": []}] if path.startswith(("/payment-button/process",
                                                              "/payment-button/links",
                                                              "/payment-button/webhook-endpoints"))
                else []
            )
            assert operation["security"] == expected, (method, path)


def test_every_error_response_uses_the_shared_error_schema(document):
    components = document["components"]

    def resolve(node):
        while "$ref" in node:
            _, _, section, name = node["$ref"].split("/")
            node = components[section][name]
        return node

    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                if status.startswith("2"):
                    continue
                schema = resolve(resolve(response)["content"]["application/json"]["schema"])
                assert schema["allOf"][0] == {"$ref": "#/components/schemas/Error"}, (path, status)
                codes = schema["allOf"][1]["properties"]["code"]["enum"]
                assert codes, (path, status)


def test_webhooks_describe_every_event_type(document):
    from app.domain.outbox import EVENT_TYPES

    assert set(document["webhooks"]) == set(EVENT_TYPES)
    for event_type, item in document["webhooks"].items():
        operation = item["post"]
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert headers == {"webhook-id", "webhook-timestamp", "webhook-signature"}
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        event = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert event["properties"]["type"] == {"const": event_type}


def test_unknown_path_and_wrong_method_stay_json(client):
    # Not operations of the document, but its description promises them.
    assert_error(client.get("/openapi.yaml"), 404, "not_found")
    response = client.post("/openapi.json")
    assert_error(response, 405, "method_not_allowed")
    assert sorted(response.headers["Allow"].split(", ")) == ["GET", "HEAD", "OPTIONS"]
