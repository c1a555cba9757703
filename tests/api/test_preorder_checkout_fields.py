"""The preorder's checkout fields (docs/api.md, "The checkout page and payment links"): a plain-text
`description` of at most 250 characters, `successUrl` and `cancelUrl` (absolute http(s) URLs of at
most 2,048 characters, https only for live merchants), and the Process object's `checkoutUrl` made
from PUBLIC_BASE_URL or, unset, the request's own scheme and host."""
import pytest
from support.helpers import Api, assert_error


def test_the_fields_are_stored_and_shown(api):
    body = {"amount": 5, "description": "Two espresso cups, blue", "successUrl":
            "http://shop.test/thanks?order=7", "cancelUrl": "https://shop.test/cart"}
    created = api.preorder(body)
    assert created.status_code == 200, created.text
    process = created.get_json()
    assert (process["description"], process["successUrl"], process["cancelUrl"]) == (
        "Two espresso cups, blue", "http://shop.test/thanks?order=7", "https://shop.test/cart")
    assert api.get(process["processId"]).get_json() == process


@pytest.mark.parametrize("field, value, message", [
    ("description", "", "Length must be between 1 and 250."),
    ("description", "x" * 251, "Length must be between 1 and 250."),
    ("description", "line\nbreak", "Must be plain text, without control characters."),
    ("description", "nul\u0000", "Must be plain text, without control characters."),
    ("description", "half \ud800 a pair", "Must not contain unpaired UTF-16 surrogate escapes."),
    ("description", 5, "Must be a JSON string."),
    ("successUrl", "/thanks",
     "Must be an absolute https:// URL (http:// in test mode) of at most 2,048 characters."),
    ("successUrl", "javascript:alert(1)",
     "Must be an absolute https:// URL (http:// in test mode) of at most 2,048 characters."),
    ("cancelUrl", "ftp://shop.test/",
     "Must be an absolute https:// URL (http:// in test mode) of at most 2,048 characters."),
    ("cancelUrl", "https://shop.test/" + "a" * 2031,
     "Must be an absolute https:// URL (http:// in test mode) of at most 2,048 characters."),
    ("cancelUrl", "https://shop.test/\u00e9",
     "Must be an absolute https:// URL (http:// in test mode) of at most 2,048 characters."),
    ("successUrl", None, "Must be a JSON string, not null."),
])
def test_bad_fields_are_refused_naming_them(api, field, value, message):
    assert_error(api.preorder({"amount": 5, field: value}), 400, "validation_error",
                 f"{field}: {message}")


def test_the_longest_url_passes(api):
    url = "https://shop.test/" + "a" * 2030
    assert len(url) == 2048
    assert api.preorder({"amount": 5, "successUrl": url}).get_json()["successUrl"] == url


def test_a_live_merchant_sends_customers_to_https_only(client, make_merchant):
    live = Api(client, make_merchant(live=True)["secretKey"])
    assert_error(live.preorder({"amount": 5, "successUrl": "http://shop.test/thanks"}), 400,
                 "validation_error",
                 "successUrl: Must be an https:// URL: live payments never send a customer to plain"
                 " http.")
    assert live.preorder({"amount": 5, "cancelUrl": "https://shop.test/cart"}).status_code == 200


@pytest.fixture
def app_config():
    return {"PUBLIC_BASE_URL": "https://pay.example.com/"}


def test_checkout_url_starts_with_public_base_url(api):
    process = api.preorder({"amount": 5}).get_json()
    assert process["checkoutUrl"] == f"https://pay.example.com/checkout/{process['processId']}"


def test_an_idempotency_key_tells_checkout_fields_apart(api):
    headers = {"Idempotency-Key": "k-1"}
    first = api.preorder({"amount": 5, "description": "Cup"}, headers=headers)
    assert (api.preorder({"amount": 5, "description": "Cup"}, headers=headers).get_json()
            == first.get_json())
    assert_error(api.preorder({"amount": 5, "description": "Mug"}, headers=headers), 409,
                 "idempotency_key_reused")


def test_text_goes_out_as_utf_8_with_quotes_and_backslashes_escaped(api):
    # The one JSON writer: strings as UTF-8, never \u escapes; what JSON needs escaped, escaped.
    description = 'Tasse à café "Ø" \\ 東京 €'
    response = api.preorder({"amount": 4, "description": description})
    assert response.status_code == 200
    assert '"description":"Tasse à café \\"Ø\\" \\\\ 東京 €"'.encode() in response.data
    assert response.get_json()["description"] == description
