"""A merchant taking live payments on the test chain, as the chain tests drive it: preorders through
the merchant API, the watcher through its CLI, events read from the outbox.

`add_network`/`add_payment` write the operator's and the confirm call's rows directly: a stand-in
until the operator CLI (`networks add`, `assets add`, `merchants set-xpub`) and the confirm API are
on this branch, which then replace them.
"""
import json
import secrets
from decimal import Decimal

from app.data import events as event_rows

NETWORK = "hardhat"
DECIMALS = 6


def add_network(app, chain, *, confirmations=3, network_id=NETWORK, rpc_url=None, chain_id=31337):
    start = chain.head() + 1
    with app.extensions["db"].transaction() as conn:
        conn.execute(
            "INSERT INTO networks (id, name, chain_id, rpc_url, confirmations, start_block,"
            " scanned_block, head_block, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            (network_id, "Hardhat", chain_id, rpc_url or chain.url, confirmations, start,
             start - 1, start - 1),
        )
        conn.execute(
            "INSERT INTO assets (id, network_id, symbol, name, contract, decimals, created_at)"
            " VALUES ('tusd', ?, 'TUSD', 'Test USD', ?, ?, 0)",
            (network_id, chain.token, DECIMALS),
        )


_index = iter(range(10**9))


def add_payment(app, process_id, merchant_id, amount, *, chain, network_id=NETWORK, address=None):
    """The row confirm writes: a fresh deposit address, the amount in base units."""
    address = address or "0x" + secrets.token_hex(20)
    due = int(Decimal(str(amount)).scaleb(DECIMALS))
    with app.extensions["db"].transaction() as conn:
        conn.execute(
            "INSERT INTO payments (process_id, merchant_id, address_index, address, asset_id,"
            " network_id, chain_id, token_contract, decimals, amount_due, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'tusd', ?, 31337, ?, ?, ?, 0, 0)",
            (process_id, merchant_id, next(_index), address, network_id, chain.token, DECIMALS,
             str(due)),
        )
    return address


class Shop:
    def __init__(self, app, api, runner, chain, clock, merchant):
        self.app, self.api, self.runner, self.chain, self.clock = app, api, runner, chain, clock
        self.merchant = merchant

    def sync_clock(self):
        """The app's clock at the chain's latest block time."""
        self.clock.now = self.chain.timestamp()

    def order(self, amount, metadata=None):
        """A preorder, confirmed: (process id, deposit address)."""
        body = {"amount": amount, "metadata": metadata or {"orderRef": "A-1"}}
        response = self.api.preorder(body)
        assert response.status_code == 200, response.get_data(as_text=True)
        process_id = response.get_json()["processId"]
        address = add_payment(self.app, process_id, self.merchant["merchantId"], amount,
                              chain=self.chain)
        return process_id, address

    def watch(self, *args, exit_code=0):
        result = self.runner.invoke(args=["watch-payments", "--once", *args])
        assert result.exit_code == exit_code, result.output
        return result

    def process(self, process_id):
        response = self.api.get(process_id)
        assert response.status_code == 200
        return response.get_json()

    def events(self, process_id):
        """(type, payload dict) of the process's events, oldest first."""
        conn = self.app.extensions["db"].connection()
        return [(e.type, json.loads(e.payload)) for e in event_rows.for_process(conn, process_id)]

    def event_types(self, process_id):
        return [t for t, _ in self.events(process_id)]

    def transfers(self, process_id):
        conn = self.app.extensions["db"].connection()
        return [dict(r) for r in conn.execute(
            "SELECT tx_hash, status, amount, block_number FROM transfers WHERE process_id = ?"
            " ORDER BY block_number, log_index", (process_id,))]
