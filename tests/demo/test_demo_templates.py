"""The demo shop templates (app/demo/templates/demo/*.html), rendered by a bare Flask app.

These tests render the templates with the contexts their comment documents and read the HTML
(escaping, error placement, ordering). The pages as the real routes serve them, in Chromium with the
real service: tests/demo/test_demo_e2e.py; the routes themselves: tests/demo/test_demo_shop.py.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from flask import Flask, render_template

APP_DIR = Path(__file__).resolve().parent.parent.parent / "app"
HOSTILE = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def render():
    flask_app = Flask("demo_templates", template_folder=str(APP_DIR / "demo" / "templates"))

    def render(name, **context):
        with flask_app.test_request_context("/"):
            return render_template(f"demo/{name}", **context)
    return render


class Tags(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.tags = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def find(self, tag):
        return [attrs for name, attrs in self.tags if name == tag]


def delivery(n, received_at, verified=True, body='{"type": "payment.completed"}'):
    return {"received_at": received_at, "webhook_id": f"msg_{n}", "type": "payment.completed",
            "verified": verified, "body_pretty": body}


def test_shop_without_a_process_shows_the_form_only(render):
    html = render("shop.html")
    tags = Tags(html)
    assert [a["name"] for a in tags.find("input")] == ["amount", "order_ref"]
    assert tags.find("form") == [{"method": "post", "novalidate": None}]
    assert tags.find("payment-button") == []
    assert [a.get("src") for a in tags.find("script")] == []
    assert [a["src"] for a in tags.find("iframe")] == ["/demo/webhooks"]


def test_shop_with_a_process_renders_the_button_and_its_script(render):
    html = render("shop.html", process_id="p-1", public_key="pk_test_abc", amount="19.99",
                  order_ref="A-1", currency="EUR", button_js_url="/payment-button/button.js")
    tags = Tags(html)
    # the process carries its currency: the button reads it from the service
    assert tags.find("payment-button") == [{"process-id": "p-1", "public-key": "pk_test_abc"}]
    assert [a["src"] for a in tags.find("script") if "src" in a] == ["/payment-button/button.js"]
    assert [a["value"] for a in tags.find("input")] == ["19.99", "A-1"]


def test_shop_shows_errors_next_to_their_fields(render):
    html = render("shop.html", amount="-1", error="amount: Must be greater than 0.",
                  errors={"amount": ["Must be greater than 0."]})
    tags = Tags(html)
    assert tags.find("input")[0]["aria-invalid"] == "true"
    assert '<p class="error" role="alert">amount: Must be greater than 0.</p>' in html
    assert '<p class="field-error" id="amount-error">Must be greater than 0.</p>' in html


def test_shop_escapes_what_the_customer_typed(render):
    html = render("shop.html", process_id="p-1", public_key="pk_test_abc", order_ref=HOSTILE,
                  amount=HOSTILE)
    assert HOSTILE not in html
    # two inputs, the summary
    assert html.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") == 3


def test_webhooks_newest_first_verified_marked_and_escaped(render):
    html = render("webhooks.html", deliveries=[
        delivery(1, "2026-11-22T10:00:00Z"),
        delivery(2, "2026-11-22T10:05:00Z", verified=False, body=f'{{"orderRef": {HOSTILE!r}}}'),
        delivery(3, "2026-11-22T10:01:00Z"),
    ])
    assert re.findall(r'data-webhook-id="(msg_\d)"', html) == ["msg_2", "msg_3", "msg_1"]
    assert re.findall(r"Signature (verified|INVALID)", html) == ["INVALID", "verified", "verified"]
    assert HOSTILE not in html
    assert '<span id="count">3</span>' in html


def test_webhooks_empty_says_how_to_get_one(render):
    html = render("webhooks.html", deliveries=[])
    assert "No webhook yet." in html
    assert '<span id="count">0</span>' in html


@pytest.mark.parametrize("name, context", [("shop.html", {}),
                                           ("webhooks.html", {"deliveries": []})])
def test_pages_declare_their_icon_so_no_favicon_request_is_made(render, name, context):
    # Without a <link rel="icon">, every browser asks for /favicon.ico, which is no route (a 404).
    icons = [attrs for attrs in Tags(render(name, **context)).find("link")
             if attrs.get("rel") == "icon"]
    assert icons == [{"rel": "icon", "href": "data:,"}]
