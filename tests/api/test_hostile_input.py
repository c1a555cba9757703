"""Hostile input: one table of requests nobody planned for, each with its exact status and error
code (and the field or message where it matters), all sent to one app and one SQLite file.
The last test then proves nothing else happened: every row that existed is unchanged, and the only
new rows are the processes (and Idempotency-Key records) of the requests that were accepted.

Preorder bodies are raw text, so that literals such as 19.99, 1e400 or NaN reach the service as
written (docs/contract.md, Preorder request; README, Decisions).
"""
import json
import sqlite3
from dataclasses import dataclass, field

import pytest
from support.helpers import FakeClock, assert_error

from app import create_app
from app.db import init_db

PREORDER = "/payment-button/process/preorder"
PROCESS = "/payment-button/process/{id}"
CANCEL = "/payment-button/process/{id}/cancel"
PUBLIC_VIEW = "/payment-button/process/{id}/public"
SANDBOX_PAY = "/payment-button/process/{id}/sandbox/pay"
BUTTON_JS = "/payment-button/button.js"
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
ACCEPT = "/payment-button/process/{id}/unexpected-transfers/{key}/accept"
TX = "0x" + "ab" * 32  # a transaction hash nobody sent

# Keys known once the catalog's merchants exist; rows name them by these tokens.
SECRET, PUBLIC, REVOKED = "<secret key>", "<public key>", "<revoked key>"
# The id of a process that exists before the catalog runs.
KNOWN = "<known process>"


@dataclass(frozen=True)
class Req:
    method: str = "POST"
    path: str = PREORDER
    body: bytes | None = b'{"amount": 5}'
    content_type: str | None = "application/json"
    key: str | None = SECRET  # x-secret-key; None: no header at all
    headers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Expect:
    status: int
    code: str | None = None  # None for 2xx
    field: str | None = None  # a key of "errors" that must name the fault
    message: str | None = None  # a text the message must contain
    allow: str | None = None  # the Allow header of a 405, methods in any order


OK = Expect(200)
INVALID_JSON = Expect(400, "invalid_json")
NOT_OBJECT = Expect(400, "validation_error")
UNSUPPORTED = Expect(415, "unsupported_media_type")
TOO_LARGE = Expect(413, "payload_too_large")
NOT_FOUND = Expect(404, "not_found")
INVALID_KEY = Expect(401, "invalid_secret_key", message="Invalid secret key.")

# What each path offers, as its 405 answers say in Allow.
ALLOWED = {
    PREORDER: "OPTIONS, POST",
    PROCESS: "GET, HEAD, OPTIONS",
    CANCEL: "OPTIONS, POST",
    "/payment-button/processes": "GET, HEAD, OPTIONS",
    "/healthz": "GET, HEAD, OPTIONS",
    "/openapi.json": "GET, HEAD, OPTIONS",
    PUBLIC_VIEW: "GET, HEAD, OPTIONS",
    SANDBOX_PAY: "OPTIONS, POST",
    BUTTON_JS: "GET, HEAD, OPTIONS",
}


def invalid(name):
    return Expect(400, "validation_error", field=name)


def nested_metadata(depth):
    """A metadata object `depth` levels deep (the metadata object itself is level 1)."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def metadata_of_size(size):
    """A body whose metadata is exactly `size` bytes as compact UTF-8 JSON, sent indented: only
    the compact encoding counts."""
    metadata = {"k": "x" * (size - len('{"k":""}'))}
    assert len(json.dumps(metadata, separators=(",", ":")).encode()) == size
    return json.dumps({"amount": 5, "metadata": metadata}, indent=4)


def body_of_size(size):
    """A preorder body of exactly `size` bytes (its metadata far over its own limit)."""
    body = b'{"amount": 5, "metadata": {"k": ""}}'
    return body[:-3] + b"x" * (size - len(body)) + body[-3:]


def multibyte_metadata(characters):
    return json.dumps({"amount": 5, "metadata": {"k": "€" * characters}}, ensure_ascii=False)


# The preorder body, case by case: (id, body text, expected).
BODIES = [
    ("integer amount", '{"amount": 20}', OK),
    ("two decimals", '{"amount": 19.99}', OK),
    ("one decimal", '{"amount": 0.5}', OK),
    ("smallest amount", '{"amount": 0.01}', OK),
    ("maximum amount", '{"amount": 1000000}', OK),
    ("maximum with zero decimals", '{"amount": 1000000.00}', OK),
    ("trailing zeros beyond places", '{"amount": 1.500}', OK),
    ("exponent form", '{"amount": 1.5e2}', OK),
    ("amount only, metadata omitted", '{"amount": 5}', OK),
    ("empty metadata", '{"amount": 5, "metadata": {}}', OK),
    ("nested metadata", '{"amount": 5, "metadata": {"a": {"b": [1, {"c": null}]}}}', OK),
    ("unicode metadata", '{"amount": 5, "metadata": {"name": "Zoë 東京 🎉"}}', OK),
    ("zero", '{"amount": 0}', invalid("amount")),
    ("negative zero", '{"amount": -0}', invalid("amount")),
    ("negative", '{"amount": -5}', invalid("amount")),
    ("over maximum", '{"amount": 1000000.01}', invalid("amount")),
    ("huge exponent 1e400", '{"amount": 1e400}', invalid("amount")),
    ("exponent beyond Decimal", '{"amount": 1e999999999999999999999}', invalid("amount")),
    ("negative exponent beyond Decimal", '{"amount": 1e-999999999999999999999}', invalid("amount")),
    ("tiny exponent 1e-7", '{"amount": 1e-7}', invalid("amount")),
    ("three decimals", '{"amount": 1.005}', invalid("amount")),
    ("binary float artefact", '{"amount": 0.30000000000000004}', invalid("amount")),
    ("34 significant digits", '{"amount": 1.000000000000000000000000000000001}', invalid("amount")),
    ("5000-digit integer", '{"amount": ' + "9" * 5000 + "}", invalid("amount")),
    ("string amount", '{"amount": "12.50"}', invalid("amount")),
    ("boolean amount", '{"amount": true}', invalid("amount")),
    ("null amount", '{"amount": null}', invalid("amount")),
    ("array amount", '{"amount": [12]}', invalid("amount")),
    ("object amount", '{"amount": {"value": 12}}', invalid("amount")),
    ("missing amount", '{"metadata": {"orderRef": "A-1"}}', invalid("amount")),
    ("NaN literal", '{"amount": NaN}', INVALID_JSON),
    ("Infinity literal", '{"amount": Infinity}', INVALID_JSON),
    ("-Infinity literal", '{"amount": -Infinity}', INVALID_JSON),
    ("metadata array", '{"amount": 5, "metadata": [1, 2]}', invalid("metadata")),
    ("metadata string", '{"amount": 5, "metadata": "A-1"}', invalid("metadata")),
    ("metadata null", '{"amount": 5, "metadata": null}', invalid("metadata")),
    ("metadata number", '{"amount": 5, "metadata": 7}', invalid("metadata")),
    ("metadata 32 deep", '{"amount": 5, "metadata": ' + nested_metadata(32) + "}", OK),
    ("metadata 33 deep", '{"amount": 5, "metadata": ' + nested_metadata(33) + "}",
     invalid("metadata")),
    ("metadata 33 deep via arrays", '{"amount": 5, "metadata": {"a": ' + "[" * 32 + "]" * 32 + "}}",
     invalid("metadata")),
    ("metadata lone surrogate", '{"amount": 5, "metadata": {"a": "\\ud800"}}', invalid("metadata")),
    ("metadata 10240 bytes exactly", metadata_of_size(10_240), OK),
    ("metadata 10241 bytes", metadata_of_size(10_241), invalid("metadata")),
    ("metadata 9 KB of 3-byte characters", multibyte_metadata(3_000), OK),
    ("metadata 9000 3-byte characters counted in bytes", multibyte_metadata(9_000),
     invalid("metadata")),
    ("typo ammount", '{"ammount": 5}', invalid("ammount")),
    ("unknown field", '{"amount": 5, "colour": "red"}', invalid("colour")),
    ("body is an array", "[1, 2]", NOT_OBJECT),
    ("body is a string", '"amount"', NOT_OBJECT),
    ("body is a number", "12", NOT_OBJECT),
    ("body is null", "null", NOT_OBJECT),
    ("invalid JSON", "{amount: 5}", INVALID_JSON),
    ("truncated JSON", '{"amount": 5', INVALID_JSON),
    ("empty body", "", INVALID_JSON),
    ("duplicate keys", '{"amount": 5, "amount": 6}', INVALID_JSON),
    ("duplicate keys inside metadata", '{"amount": 5, "metadata": {"a": 1, "a": 2}}', INVALID_JSON),
    ("trailing garbage", '{"amount": 5} x', INVALID_JSON),
]

# Everything else: (id, request, expected).
REQUESTS = [
    # Content-Type and bytes on the wire
    ("Content-Type missing", Req(content_type=None), UNSUPPORTED),
    ("Content-Type text/plain", Req(content_type="text/plain"), UNSUPPORTED),
    ("Content-Type form", Req(content_type="application/x-www-form-urlencoded"), UNSUPPORTED),
    # the contract: "a charset parameter is fine". JSON is UTF-8 whatever the label says (RFC 8259).
    ("charset=latin-1, ASCII body", Req(content_type="application/json; charset=latin-1"), OK),
    ("charset=latin-1, latin-1 bytes",
     Req(body='{"amount": 5, "metadata": {"n": "\xe9"}}'.encode("latin-1"),
         content_type="application/json; charset=latin-1"), INVALID_JSON),
    ("charset=utf-16", Req(content_type="application/json; charset=utf-16"), OK),
    ("charset=utf-8", Req(content_type="application/json; charset=utf-8"), OK),
    ("charset=UTF-8", Req(content_type="application/json; charset=UTF-8"), OK),
    ("media type in capitals", Req(content_type="Application/JSON"), OK),
    ("bytes that are not UTF-8", Req(body=b'{"amount": 5, "metadata": {"a": "\xff"}}'),
     INVALID_JSON),
    ("UTF-8 byte order mark", Req(body=b'\xef\xbb\xbf{"amount": 5}'), INVALID_JSON),
    ("100,000-deep [[[...]]] body", Req(body=b"[" * 100_000 + b"]" * 100_000), TOO_LARGE),
    ("60,000-deep body within the size limit",
     Req(body=b'{"amount": 5, "metadata": ' + b"[" * 60_000), INVALID_JSON),
    ("body of exactly 64 KiB is read", Req(body=body_of_size(65_536)), invalid("metadata")),
    ("body of 64 KiB + 1 byte", Req(body=body_of_size(65_537)), TOO_LARGE),
    ("1 MB body", Req(body=json.dumps({"amount": 5, "metadata": {"k": "x" * 1_000_000}}).encode()),
     TOO_LARGE),
    # x-secret-key
    ("no x-secret-key", Req(key=None), Expect(401, "missing_secret_key")),
    ("empty x-secret-key", Req(key=""), Expect(401, "missing_secret_key")),
    ("unknown secret key", Req(key="sk_test_" + "a" * 40), INVALID_KEY),
    ("nonsense secret key", Req(key="nonsense"), INVALID_KEY),
    ("10 KB secret key", Req(key="x" * 10_000), INVALID_KEY),
    ("secret key with control characters", Req(key="sk_test_\x00\x01\x02\x1b\x7f"), INVALID_KEY),
    ("public key as secret key", Req(key=PUBLIC),
     Expect(401, "invalid_secret_key", message="public key")),
    ("revoked secret key", Req(key=REVOKED), INVALID_KEY),
    # Idempotency-Key
    ("Idempotency-Key of 255 characters", Req(headers={"Idempotency-Key": "k" * 255}), OK),
    ("Idempotency-Key of 256 characters", Req(headers={"Idempotency-Key": "k" * 256}),
     invalid("Idempotency-Key")),
    ("blank Idempotency-Key", Req(headers={"Idempotency-Key": "   "}), invalid("Idempotency-Key")),
    # Process ids in paths: anything but a UUID is 404, like an unknown id
    ("uppercase UUID of a process", Req("GET", PROCESS.format(id=KNOWN.upper()), None, None), OK),
    *[
        (f"{verb} {label}", Req(method, path.format(id=value), None, None), NOT_FOUND)
        for label, value in [
            ("unknown UUID", UNKNOWN_ID),
            ("unknown UUID in capitals", UNKNOWN_ID.upper().replace("-4000-", "-4ABC-")),
            ("id that is not a UUID", "not-a-uuid"),
            ("UUID in braces", "{12345678-1234-1234-1234-123456789012}"),
            ("UUID without dashes", UNKNOWN_ID.replace("-", "")),
            ("%00", "%00"),
            ("%00 after a UUID", UNKNOWN_ID + "%00"),
            ("path traversal ../", "../processes"),
            ("encoded path traversal", "..%2F..%2Fetc%2Fpasswd"),
        ]
        for verb, method, path in [("GET", "GET", PROCESS), ("cancel", "POST", CANCEL)]
    ],
    # Path and query values are read as ASCII: other scripts' digits, superscripts and circled
    # ones are 400 validation_error naming the value (never a 500, never the ASCII number they
    # resemble); an ASCII key that names no transfer is 404, like an unknown one.
    *[
        (f"unexpected transfer key with {label}",
         Req("POST", ACCEPT.format(id=KNOWN, key=key), None, None), invalid("transfer"))
        for label, key in [
            ("superscript three", TX + ":³"), ("superscript two", TX + ":²"),
            ("circled one", TX + ":①"), ("Arabic-Indic three", TX + ":٣"),
            ("mathematical bold three", TX + ":𝟑"), ("Devanagari three", TX + ":३"),
            ("fullwidth three", TX + ":３"), ("ASCII and Arabic-Indic digits", TX + ":1٣"),
            ("Arabic-Indic digit in the hash", TX[:-1] + "٣:3"),
            ("fullwidth 0x", "０x" + TX[2:] + ":3"),
        ]
    ],
    ("unexpected transfer key with other digits, unknown process",
     Req("POST", ACCEPT.format(id=UNKNOWN_ID, key=TX + ":٣"), None, None), invalid("transfer")),
    *[
        (f"unexpected transfer key {label}",
         Req("POST", ACCEPT.format(id=KNOWN, key=key), None, None),
         NOT_FOUND)
        for label, key in [("of ASCII digits", TX + ":3"), ("with a sign", TX + ":+3"),
                           ("with a space", TX + ":%203"), ("of 10 digits", TX + ":" + "1" * 10),
                           ("without an index", TX + ":"), ("with a short hash", "0x12:3")]
    ],
    ("list limit of Arabic-Indic digits",
     Req("GET", "/payment-button/processes?limit=٣", None, None),
     invalid("limit")),
    ("list limit of superscripts", Req("GET", "/payment-button/processes?limit=³", None, None),
     invalid("limit")),
    # The Button API's other id cases are in tests/button/test_button_api.py
    ("public view, path traversal ../",
     Req("GET", PUBLIC_VIEW.format(id="../processes"), None, None), NOT_FOUND),
    ("sandbox pay, path traversal ../", Req("POST", SANDBOX_PAY.format(id="../../healthz")),
     NOT_FOUND),
    # Methods a path does not offer: 405 with Allow
    *[
        (f"{method} {path}", Req(method, path.format(id=KNOWN), None, None),
         Expect(405, "method_not_allowed", allow=ALLOWED[path]))
        for method, path in [
            # /process/preorder is no process id: GET is 405, not a 404 (found by schemathesis)
            ("GET", PREORDER),
            ("PUT", PREORDER),
            ("DELETE", PREORDER),
            ("PATCH", PREORDER),
            ("TRACE", PREORDER),
            ("FOO", PREORDER),
            ("DELETE", PROCESS),
            ("PUT", PROCESS),
            ("POST", PROCESS),
            ("GET", CANCEL),
            ("DELETE", CANCEL),
            ("POST", "/payment-button/processes"),
            ("DELETE", "/payment-button/processes"),
            ("POST", "/healthz"),
            ("PUT", "/openapi.json"),
            ("DELETE", PUBLIC_VIEW),
            ("POST", PUBLIC_VIEW),
            ("GET", SANDBOX_PAY),
            ("PUT", SANDBOX_PAY),
            ("POST", BUTTON_JS),
        ]
    ],
]

CATALOG = [(case_id, Req(body=body.encode("utf-8")), expect) for case_id, body, expect in BODIES]
CATALOG += REQUESTS


class Catalog:
    """One app and database for the whole catalog, and what the accepted requests created."""

    def __init__(self, tmp_path):
        self.database = str(tmp_path / "hostile.sqlite3")
        self.app = create_app({"DATABASE": self.database, "CLOCK": FakeClock()})
        with self.app.app_context():
            init_db()
        self.client = self.app.test_client()
        runner = self.app.test_cli_runner()
        merchant = self._merchant(runner, "Hostile input")
        revoked = self._merchant(runner, "Revoked key")
        result = runner.invoke(args=["merchants", "revoke-key", revoked["merchantId"],
                                     revoked["secretKey"]])
        assert result.exit_code == 0, result.output
        self.tokens = {SECRET: merchant["secretKey"], PUBLIC: merchant["publicKey"],
                       REVOKED: revoked["secretKey"]}
        created = self.client.post(PREORDER, json={"amount": 1},
                                   headers={"x-secret-key": self.tokens[SECRET]})
        assert created.status_code == 200
        self.known_process = created.get_json()["processId"]
        self.merchant_id = merchant["merchantId"]
        self.before = self.rows()
        self.created_processes = set()
        self.idempotency_keys = set()

    @staticmethod
    def _merchant(runner, name):
        result = runner.invoke(args=["merchants", "create", "--name", name, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    def send(self, req: Req):
        headers = dict(req.headers)
        if req.key is not None:
            headers["x-secret-key"] = self.tokens.get(req.key, req.key)
        if req.content_type is not None:
            headers["Content-Type"] = req.content_type
        path = req.path.replace(KNOWN, self.known_process).replace(KNOWN.upper(),
                                                                   self.known_process.upper())
        return self.client.open(path, method=req.method, data=req.body, headers=headers)

    def rows(self):
        """Every row of every table, as {table: set of rows}, read with a separate connection."""
        conn = sqlite3.connect(self.database)
        try:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            return {t: set(conn.execute(f'SELECT * FROM "{t}"')) for t in tables}
        finally:
            conn.close()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    catalog = Catalog(tmp_path_factory.mktemp("hostile"))
    yield catalog
    catalog.app.extensions["db"].close_all()


@pytest.mark.parametrize("req,expect", [c[1:] for c in CATALOG], ids=[c[0] for c in CATALOG])
def test_hostile_request(catalog, req, expect):
    response = catalog.send(req)
    if expect.status == 200:
        assert response.status_code == 200, response.get_data(as_text=True)
        process = response.get_json()
        if req.method == "POST":
            assert process["status"] == "pending"
            assert process["metadata"] == json.loads(req.body).get("metadata", {})
            catalog.created_processes.add(process["processId"])
            if "Idempotency-Key" in req.headers:
                catalog.idempotency_keys.add(req.headers["Idempotency-Key"])
        else:
            assert process["processId"] == catalog.known_process
        return
    error = assert_error(response, expect.status, expect.code)
    if expect.field is not None:
        assert expect.field in error["errors"], error
        assert f"{expect.field}: " in error["message"]
    if expect.message is not None:
        assert expect.message in error["message"]
    if expect.allow is not None:
        assert sorted(response.headers["Allow"].split(", ")) == sorted(expect.allow.split(", "))
    assert "Traceback" not in response.get_data(as_text=True)


def test_catalog_covers_each_kind_of_outcome():
    outcomes = {(e.status, e.code) for _, _, e in CATALOG}
    assert outcomes == {
        (200, None), (400, "invalid_json"), (400, "validation_error"),
        (401, "missing_secret_key"), (401, "invalid_secret_key"), (404, "not_found"),
        (405, "method_not_allowed"), (413, "payload_too_large"), (415, "unsupported_media_type"),
    }


def test_a_100000_deep_body_the_parser_sees_is_refused_without_a_crash(tmp_path, clock):
    # At the default 64 KiB limit such a body is refused for its size before it is parsed (see
    # the catalog); with a larger limit the parser meets it, and must not raise RecursionError.
    app = create_app({"DATABASE": str(tmp_path / "deep.sqlite3"), "CLOCK": clock,
                      "MAX_CONTENT_LENGTH": 1 << 20})
    with app.app_context():
        init_db()
    key = json.loads(app.test_cli_runner().invoke(
        args=["merchants", "create", "--name", "Deep", "--json"]).output)["secretKey"]
    client = app.test_client()
    for body in (b"[" * 100_000 + b"]" * 100_000,
                 b'{"amount": 5, "metadata": ' + b'{"a":' * 100_000):
        response = client.post(PREORDER, data=body, content_type="application/json",
                               headers={"x-secret-key": key})
        assert_error(response, 400, "invalid_json", "Request body nests too deeply.")
    # The same process goes on serving.
    response = client.post(PREORDER, json={"amount": 5}, headers={"x-secret-key": key})
    assert response.status_code == 200
    app.extensions["db"].close_all()


def test_metadata_nested_up_to_the_parsers_limit_is_a_400_at_every_depth(tmp_path, clock):
    # Depths just below the decoder's recursion limit parse, and the metadata check then runs with
    # even less stack left: it must answer validation_error there (a C-level encoder that walked
    # the whole value first would hit RecursionError, a 500), and invalid_json once the decoder
    # itself gives up.
    app = create_app({"DATABASE": str(tmp_path / "deep.sqlite3"), "CLOCK": clock})
    with app.app_context():
        init_db()
    key = json.loads(app.test_cli_runner().invoke(
        args=["merchants", "create", "--name", "Deep", "--json"]).output)["secretKey"]
    client = app.test_client()
    codes = set()
    for depth in range(850, 1050):
        body = '{"amount": 5, "metadata": ' + nested_metadata(depth) + "}"
        response = client.post(PREORDER, data=body, content_type="application/json",
                               headers={"x-secret-key": key})
        assert response.status_code == 400, (depth, response.get_json())
        codes.add(response.get_json()["code"])
    assert codes == {"validation_error", "invalid_json"}
    app.extensions["db"].close_all()


def test_database_holds_only_what_accepted_requests_created(catalog):
    # Runs after the catalog (pytest keeps file order); alone, it checks that nothing changed.
    after = catalog.rows()
    assert set(after) == set(catalog.before)
    for table, rows in catalog.before.items():
        assert rows <= after[table], f"rows of {table} changed or vanished"
    new = {table: after[table] - rows for table, rows in catalog.before.items()}
    created = new.pop("processes")
    assert {row[1] for row in created} == catalog.created_processes  # row[1]: id
    # The console's search index holds values of the created processes only (row[1]: their seq).
    assert {row[1] for row in new.pop("process_search")} <= {row[0] for row in created}
    assert ({row[1] for row in new.pop("idempotency_keys")}  # row[1]: key
            == catalog.idempotency_keys)
    assert {table: rows for table, rows in new.items() if rows} == {}
