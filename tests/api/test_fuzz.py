"""Schemathesis drives every operation of app/openapi.json against the app (WSGI, in process) with
a real SQLite file and a real merchant, running all its checks (server errors, status codes,
content types, response schemas and headers, auth enforcement, negative data rejected, positive
data accepted, unsupported methods...).

FUZZ_EXAMPLES sets the generated cases per operation (default 50, derandomised so the suite is
stable); `make fuzz` runs thousands with fresh randomness and prints the totals.
"""
import json
import os
import re
import tempfile
import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from support.fuzz_totals import record
from support.helpers import FakeClock

from app import create_app
from app.db import init_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
# Its own SQLite file whichever backend the suite runs on: the PostgreSQL pass would run it again.
pytestmark = pytest.mark.sqlite_only

_tmp = tempfile.TemporaryDirectory(prefix="preorder-fuzz-")
clock = FakeClock()
# SQLITE_SYNCHRONOUS OFF: a throwaway file needs no fsync per commit (only durability changes).
# AMOUNT_DECIMALS 2: the served document then says the amount's step (multipleOf), as a deployment
# that sets it does; unset, each currency's places decide, which a schema cannot say.
app = create_app({"DATABASE": os.path.join(_tmp.name, "fuzz.sqlite3"), "CLOCK": clock,
                  "SQLITE_SYNCHRONOUS": "OFF", "AMOUNT_DECIMALS": 2})
with app.app_context():
    init_db()
_created = app.test_cli_runner().invoke(args=["merchants", "create", "--name", "Fuzz", "--json"])
assert _created.exit_code == 0, _created.output
MERCHANT = json.loads(_created.output)
_client = app.test_client()

# Live payments: a network (added without asking a node), a 6-decimal token on it, and the
# merchant's wallet, so that confirm's 200 and 409 branches are fuzzed too.
CHOICE = {"assetId": "usdc", "networkId": "local"}
CHOICE_CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
for _args in (
    ["networks", "add", "local", "--name", "Local", "--chain-id", "31337", "--rpc-url",
     "http://127.0.0.1:1/", "--start-block", "1"],
    ["assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name", "USD Coin",
     "--contract", CHOICE_CONTRACT, "--decimals", "6", "--skip-contract-check"],
    ["merchants", "set-xpub", MERCHANT["merchantId"],
     "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3"
     "yZdUsT8ddYM3PwnATt"],
):
    _result = app.test_cli_runner().invoke(args=_args)
    assert _result.exit_code == 0, _result.output

# The merchant's keys go in as the document's security schemes, so schemathesis knows them: it
# leaves them out on purpose in its negative auth cases and probes that auth is enforced.
CONFIG = schemathesis.Config.from_dict(
    {"auth": {"openapi": {"secretKey": {"api_key": MERCHANT["secretKey"]},
                          "publicKey": {"api_key": MERCHANT["publicKey"]}}}}
)
# Every operation, /openapi.json included (schemathesis leaves the schema's own URL out unless a
# filter selects it explicitly).
schema = schemathesis.openapi.from_wsgi("/openapi.json", app, config=CONFIG).include(
    path_regex="^/")


def _fresh_process_id():
    response = _client.post(
        "/payment-button/process/preorder",
        json={"amount": 19.99, "metadata": {"orderRef": "fuzz"}},
        headers={"x-secret-key": MERCHANT["secretKey"]},
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["processId"]


ANCHOR_PROCESS_ID = _fresh_process_id()
_endpoint = app.test_cli_runner().invoke(args=["endpoints", "add", MERCHANT["merchantId"],
                                                "http://127.0.0.1:9/anchor", "--json"])
assert _endpoint.exit_code == 0, _endpoint.output
ANCHOR_ENDPOINT_ID = json.loads(_endpoint.output)["endpointId"]
ANCHOR_LINK_ID = _client.post("/payment-button/links", json={"amount": 5, "description": "Fuzz"},
                              headers={"x-secret-key": MERCHANT["secretKey"]}).get_json()["linkId"]
CUSTOMER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def _paid_process_id():
    """A completed process paid by a confirmed transfer (recorded as the chain watcher records
    one), so that creating and cancelling refunds reach their 200 branches."""
    from app.core.records import Transfer
    from app.data import transfers as transfer_rows

    process_id = _fresh_process_id()
    confirmed = _client.post(f"/payment-button/process/{process_id}/confirm", json=CHOICE,
                             headers={"x-public-key": MERCHANT["publicKey"]})
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    with app.app_context():
        with app.extensions["db"].transaction() as conn:
            transfer_rows.record(conn, Transfer(
                chain_id=31337, tx_hash="0x" + "ab" * 32, log_index=0, network_id="local",
                process_id=process_id, token_contract=CHOICE_CONTRACT,
                from_address=CUSTOMER.lower(),
                amount=19_990_000, block_number=2, block_hash="0x" + "cd" * 32,
                block_timestamp=clock(), status="confirmed", seen_at=clock(), confirmed_at=clock()))
    completed = app.test_cli_runner().invoke(args=["processes", "complete", process_id])
    assert completed.exit_code == 0, completed.output
    return process_id


PAID_PROCESS_ID = _paid_process_id()
# Unexpected transfers of one confirmed process (as the chain watcher records them), so that
# accepting one reaches its 200 (a registered asset, once) and 409 (an unregistered token, or
# accepted already) branches.
STRAY_PROCESS_ID = _fresh_process_id()
STRAY_KEYS = ("0x" + "5a" * 32 + ":1", "0x" + "5b" * 32 + ":1")


def _record_strays():
    from app.core.records import Transfer
    from app.data import transfers as transfer_rows

    confirmed = _client.post(f"/payment-button/process/{STRAY_PROCESS_ID}/confirm", json=CHOICE,
                             headers={"x-public-key": MERCHANT["publicKey"]})
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    with app.app_context():
        with app.extensions["db"].transaction() as conn:
            for key, token in zip(STRAY_KEYS, (CHOICE_CONTRACT.lower(), "0x" + "77" * 20),
                                  strict=True):
                transfer_rows.record(conn, Transfer(
                    chain_id=31337, tx_hash=key[:66], log_index=1, network_id="local",
                    process_id=STRAY_PROCESS_ID, token_contract=token,
                    from_address=CUSTOMER.lower(), amount=10**6, block_number=3,
                    block_hash="0x" + "cd" * 32, block_timestamp=clock(), status="confirmed",
                    seen_at=clock(), confirmed_at=clock()), table=transfer_rows.UNEXPECTED)


_record_strays()


def _well_formed_id(value):
    try:
        return isinstance(value, str) and len(value) == 36 and bool(uuid.UUID(value))
    except ValueError:
        return False


def _aim_at_a_real_process(case):
    """Random UUIDs name no process: in half of the cases a well-formed processId is swapped for
    a fresh pending process of this merchant (or, for refunds, mostly for the paid one), so the 200
    and 409 branches are fuzzed and not only the 404 one. A valid id replaces a valid id: the case
    stays as positive or negative as it was generated. (Stateful runs follow the document's links
    to real ids instead.)"""
    path = case.path_parameters or {}
    if (isinstance(path.get("transfer"), str)
            and re.fullmatch(r"0x[0-9a-fA-F]{64}(:|%3A)[0-9]{1,9}\n?", path["transfer"])):
        # Unexpected transfers: a real one of a real process (accepted once, then 409). The
        # generated value comes percent-encoded (":" as %3A); the real one is encoded again.
        path["processId"] = STRAY_PROCESS_ID
        path["transfer"] = STRAY_KEYS[int(path["transfer"][2], 16) % 2]
        return
    if _well_formed_id(path.get("processId")) and path["processId"][0] in "02468ace":
        # Refunds: the paid process (200), or a pending one (409) in a quarter of the cases.
        refunds = "/refunds" in case.operation.path and path["processId"][1] in "0123456789ab"
        path["processId"] = PAID_PROCESS_ID if refunds else _fresh_process_id()


def _refunds_name_real_ones(case):
    """A refund needs the customer's real address and, to be cancelled, a real refund id, which a
    schema cannot say: a well-formed address in a refund body becomes a valid one, a positive amount
    a small one (so that the paid process is not refunded in full early on): valid values replace
    valid values, the case stays as positive or negative as it was generated. Half of the cancels
    name a pending refund of the paid process."""
    body, path = case.body, case.path_parameters or {}
    if (case.operation.path.endswith("/refunds") and case.method.upper() == "POST"
            and isinstance(body, dict)):
        if (isinstance(body.get("address"), str)
                and re.fullmatch(r"0x[0-9a-fA-F]{40}", body["address"])):
            body["address"] = CUSTOMER
        amount = body.get("amount")
        if isinstance(amount, (int, float)) and not isinstance(amount, bool) and amount > 0:
            body["amount"] = 0.01
    if path.get("refundId") is not None and path.get("processId") == PAID_PROCESS_ID:
        if len(path["refundId"]) % 2 == 0:
            created = _client.post(f"/payment-button/process/{PAID_PROCESS_ID}/refunds",
                                   json={"amount": 0.01, "address": CUSTOMER},
                                   headers={"x-secret-key": MERCHANT["secretKey"]})
            assert created.status_code == 200, created.get_data(as_text=True)
            path["refundId"] = created.get_json()["refundId"]


def _currency_is_a_real_one(case):
    """Which codes are currencies in use, and their places (JPY 0, EUR 2), is ISO 4217's data,
    which the schema's pattern cannot say: a well-formed code that is none is a 400 by design
    (tests/api/test_preorder_validation.py), not a finding. So a well-formed currency in a preorder
    or a link becomes EUR (two places, as AMOUNT_DECIMALS here)."""
    body = case.body
    if (case.operation.path.endswith(("/preorder", "/links")) and isinstance(body, dict)
            and isinstance(body.get("currency"), str)
            and re.fullmatch(r"[A-Z]{3}", body["currency"])):
        body["currency"] = "EUR"


def _confirm_names_a_real_choice(case):
    """Which assets exist is the operator's data, which a schema cannot say: a well-formed choice
    naming none is a 400 by design (tests/chain/test_live_payments_api.py), not a finding. So a
    well-formed confirm body names the real asset and network."""
    body = case.body
    if (case.operation.path.endswith("/confirm") and isinstance(body, dict)
            and set(body) == set(CHOICE)
            and all(isinstance(v, str) and 1 <= len(v) <= 64 for v in body.values())):
        body.update(CHOICE)


def _authorization_is_well_formed(case):
    """An authorization's addresses must carry a valid EIP-55 checksum when they mix cases, and its
    times are JSON integers written without a fraction, which the schema's pattern and `integer`
    cannot say: a well-formed address becomes its lowercase form, 113.0 becomes 113 (valid values
    replace valid values). The process is never confirmed on an ERC-3009 asset here: a well-formed
    body is a 409 (tests/button/test_gasless_api.py fuzzes nothing it cannot reach)."""
    body = case.body
    if case.operation.path.endswith("/authorization") and isinstance(body, dict):
        for field in ("from", "to"):
            if isinstance(body.get(field), str) and re.fullmatch(r"0x[0-9a-fA-F]{40}", body[field]):
                body[field] = body[field].lower()
        for field in ("validAfter", "validBefore"):
            value = body.get(field)
            if isinstance(value, float) and value.is_integer() and 0 <= value < 2**63:
                body[field] = int(value)


def _starting_after_names_a_real_process(case):
    """`starting_after` must name one of the caller's processes, which a schema cannot say: an
    unknown one is a 400 by design (tests/api/test_processes_api.py), not a finding. So a
    well-formed one becomes a real process id, in every phase and in stateful runs."""
    query = case.query or {}
    if _well_formed_id(query.get("starting_after")):
        query["starting_after"] = ANCHOR_PROCESS_ID
    elif re.fullmatch(r"link_[0-9a-f]{24}", str(query.get("starting_after"))):
        query["starting_after"] = ANCHOR_LINK_ID  # likewise one of the caller's links


def _expiry_is_a_real_time_ahead(case):
    """A link's `expiresAt` must be a real date and in the future, which the schema's pattern cannot
    say (2026-13-45 has its form): a well-formed one becomes a time ahead of the fuzzer's clock."""
    body = case.body
    if (case.operation.path.endswith("/links") and isinstance(body, dict)
            and isinstance(body.get("expiresAt"), str)
            and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
                             body["expiresAt"])):
        body["expiresAt"] = "2999-12-31T23:59:59Z"


def _webhook_endpoints_are_reachable_ones(case):
    """Whether a webhook URL may be called depends on where its host resolves, which a schema
    cannot say: a well-formed URL becomes one a test-mode endpoint may have (a loopback address,
    allowed in test mode where WEBHOOK_ALLOW_LOOPBACK is on); a well-formed endpoint id names one
    of the merchant's endpoints, so the 200 branches are fuzzed and not only the 404 one."""
    if "/webhook-endpoints" not in case.operation.path:
        return
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("url"), str) and re.fullmatch(
            r"[Hh][Tt][Tt][Pp][Ss]?://[!-\"$-.0->A-~]+([/?#][!-~]*)?", body["url"]) and (
            len(body["url"]) <= 2048):
        body["url"] = "http://127.0.0.1:9/fuzz"
    path = case.path_parameters or {}
    if isinstance(path.get("endpointId"), str) and re.fullmatch(r"we_[0-9a-f]{24}",
                                                                 path["endpointId"]):
        path["endpointId"] = ANCHOR_ENDPOINT_ID


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_openapi_document(case):
    _aim_at_a_real_process(case)
    _starting_after_names_a_real_process(case)
    _currency_is_a_real_one(case)
    _expiry_is_a_real_time_ahead(case)
    _webhook_endpoints_are_reachable_ones(case)
    _confirm_names_a_real_choice(case)
    _refunds_name_real_ones(case)
    _authorization_is_well_formed(case)
    response = case.call()
    failed = True
    try:
        case.validate_response(response, transport_kwargs={})
        failed = False
    finally:
        record(case.operation.label, response.status_code, failed)


# Sequences along the document's links (create a preorder, then read it, cancel it, cancel it
# again...), with every check on every response.
class LinkedCalls(schema.as_state_machine()):
    def setup(self):
        # Each scenario starts a day later: the Idempotency-Keys of earlier scenarios have
        # expired, so a scenario replays the same way when Hypothesis runs it again.
        clock.advance(app.config["IDEMPOTENCY_TTL_SECONDS"] + 1)

    def before_call(self, case):
        _starting_after_names_a_real_process(case)
        _currency_is_a_real_one(case)
        _expiry_is_a_real_time_ahead(case)
        _confirm_names_a_real_choice(case)
        _refunds_name_real_ones(case)
        _authorization_is_well_formed(case)

    def validate_response(self, response, case, additional_checks=None, **kwargs):
        failed = True
        try:
            super().validate_response(response, case, additional_checks, **kwargs)
            failed = False
        finally:
            record(f"stateful {case.operation.label}", response.status_code, failed)


TestStatefulAlongLinks = LinkedCalls.TestCase
TestStatefulAlongLinks.settings = settings(
    max_examples=max(5, EXAMPLES // 5),
    stateful_step_count=6,
    deadline=None,
    derandomize="FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=list(HealthCheck),
)
