"""Schemathesis drives every operation of app/openapi.json against the app (WSGI, in process) with
a real SQLite file and a real merchant, running all its checks (server errors, status codes,
content types, response schemas and headers, auth enforcement, negative data rejected, positive
data accepted, unsupported methods...).

FUZZ_EXAMPLES sets the generated cases per operation (default 50, derandomised so the suite is
stable); `make fuzz` runs thousands with fresh randomness and prints the totals.
"""
import json
import os
import tempfile
import uuid

import schemathesis
from hypothesis import HealthCheck, settings

from app import create_app
from app.db import init_db
from helpers import FakeClock
from fuzz_totals import record

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))

_tmp = tempfile.TemporaryDirectory(prefix="preorder-fuzz-")
clock = FakeClock()
# SQLITE_SYNCHRONOUS OFF: a throwaway file needs no fsync per commit (only durability changes).
app = create_app({"DATABASE": os.path.join(_tmp.name, "fuzz.sqlite3"), "CLOCK": clock,
                  "SQLITE_SYNCHRONOUS": "OFF"})
with app.app_context():
    init_db()
_created = app.test_cli_runner().invoke(args=["merchants", "create", "--name", "Fuzz", "--json"])
assert _created.exit_code == 0, _created.output
MERCHANT = json.loads(_created.output)
_client = app.test_client()

# Live payments: a network (added without asking a node), a 6-decimal token on it, and the
# merchant's wallet, so that confirm's 200 and 409 branches are fuzzed too.
CHOICE = {"assetId": "usdc", "networkId": "local"}
for _args in (
    ["networks", "add", "local", "--name", "Local", "--chain-id", "31337", "--rpc-url",
     "http://127.0.0.1:1/", "--start-block", "1"],
    ["assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name", "USD Coin",
     "--contract", "0x5FbDB2315678afecb367f032d93F642f64180aa3", "--decimals", "6"],
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
schema = schemathesis.openapi.from_wsgi("/openapi.json", app, config=CONFIG).include(path_regex="^/")


def _fresh_process_id():
    response = _client.post(
        "/payment-button/process/preorder",
        json={"amount": 19.99, "metadata": {"orderRef": "fuzz"}},
        headers={"x-secret-key": MERCHANT["secretKey"]},
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["processId"]


ANCHOR_PROCESS_ID = _fresh_process_id()


def _well_formed_id(value):
    try:
        return isinstance(value, str) and len(value) == 36 and bool(uuid.UUID(value))
    except ValueError:
        return False


def _aim_at_a_real_process(case):
    """Random UUIDs name no process: in half of the cases a well-formed processId is swapped for
    a fresh pending process of this merchant, so the 200 and 409 branches are fuzzed and not only
    the 404 one. A valid id replaces a valid id: the case stays as positive or negative as it was
    generated. (Stateful runs follow the document's links to real ids instead.)"""
    path = case.path_parameters or {}
    if _well_formed_id(path.get("processId")) and path["processId"][0] in "02468ace":
        path["processId"] = _fresh_process_id()


def _confirm_names_a_real_choice(case):
    """Which assets exist is the operator's data, which a schema cannot say: a well-formed choice
    naming none is a 400 by design (tests/test_live_payments_api.py), not a finding. So a
    well-formed confirm body names the real asset and network."""
    body = case.body
    if (case.operation.path.endswith("/confirm") and isinstance(body, dict) and set(body) == set(CHOICE)
            and all(isinstance(v, str) and 1 <= len(v) <= 64 for v in body.values())):
        body.update(CHOICE)


def _starting_after_names_a_real_process(case):
    """`starting_after` must name one of the caller's processes, which a schema cannot say: an
    unknown one is a 400 by design (tests/test_processes_api.py), not a finding. So a well-formed
    one becomes a real process id, in every phase and in stateful runs."""
    query = case.query or {}
    if _well_formed_id(query.get("starting_after")):
        query["starting_after"] = ANCHOR_PROCESS_ID


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
    _confirm_names_a_real_choice(case)
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
        _confirm_names_a_real_choice(case)

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
