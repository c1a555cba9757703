"""A merchant taking live payments on the test chain, set up and driven as in production: the
operator CLI (`networks add`, `assets add`, `merchants set-xpub`), preorders through the merchant
API, the customer's choice through the Button API's confirm (which gives the deposit address), the
watcher through its CLI; events read from the outbox."""
import json

from app.data import outbox as event_rows
from support.helpers import Api

NETWORK = "hardhat"
DECIMALS = 6
# The merchant's wallet: account m/44'/60'/0' of the BIP39 test mnemonic ("abandon … about"), so
# deposit addresses never coincide with Hardhat's funded senders ("test … junk").
XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBn"
        "gh5GFZaM6si3yZdUsT8ddYM3PwnATt")
# A second merchant's wallet (seed bytes 0..31): two merchants never share one.
OTHER_XPUB = ("xpub6DMFE9j2ncmpqUwtaiyPPdiYWRud5iDLhE1ka9gFJKockpH9xeXNKrXRM1XrPsh9NonaRW6hbZ83s"
              "ukTc2544gvTTTRbp1ak823LG5gBYV5")


def cli(runner, *args):
    result = runner.invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return result


def add_network(runner, chain, *, confirmations=3, rpc_url=None, network=NETWORK, name="Hardhat",
                chain_id=31337):
    """The operator enables the chain (read from the next block on) and its token."""
    cli(runner, "networks", "add", network, "--name", name, "--chain-id", str(chain_id),
        "--rpc-url", rpc_url or chain.url, "--confirmations", str(confirmations),
        "--start-block", str(chain.head() + 1))
    cli(runner, "assets", "add", "tusd", "--network", network, "--symbol", "TUSD", "--name",
        "Test USD", "--contract", chain.token, "--decimals", str(DECIMALS))


def open_shop(app, client, runner, chain, clock, merchant, *, confirmations=3, rpc_url=None):
    """`merchant` selling on the test chain: the network (`rpc_url`: a proxy in front of the node)
    and its token added, the merchant's wallet set, the app's clock at the chain's time."""
    add_network(runner, chain, confirmations=confirmations, rpc_url=rpc_url)
    shop = Shop(app, client, runner, chain, clock, merchant)
    shop.sync_clock()
    return shop


class Shop:
    def __init__(self, app, client, runner, chain, clock, merchant, xpub=XPUB):
        self.app, self.runner, self.chain, self.clock = app, runner, chain, clock
        self.merchant, self.client = merchant, client
        self.api = Api(client, merchant["secretKey"])
        cli(runner, "merchants", "set-xpub", merchant["merchantId"], xpub)

    def sync_clock(self):
        """The app's clock at the chain's latest block time."""
        self.clock.now = self.chain.timestamp()

    def preorder(self, amount, metadata=None):
        body = {"amount": amount, "metadata": metadata or {"orderRef": "A-1"}}
        response = self.api.preorder(body)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()["processId"]

    def confirm(self, process_id, network=NETWORK):
        """The customer's choice of the token on `network` (the response, whatever its status)."""
        return self.client.post(
            f"/payment-button/process/{process_id}/confirm",
            data=json.dumps({"assetId": "tusd", "networkId": network}),
            content_type="application/json", headers={"x-public-key": self.merchant["publicKey"]})

    def order(self, amount, metadata=None, network=NETWORK):
        """A preorder, confirmed by the customer: (process id, deposit address)."""
        process_id = self.preorder(amount, metadata)
        confirmed = self.confirm(process_id, network)
        assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
        payment = confirmed.get_json()["payment"]
        assert payment["amountDue"] == str(amount) and payment["transfers"] == []
        return process_id, payment["address"]

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
        """Every transfer row of the process, orphaned ones included (the API never shows those)."""
        conn = self.app.extensions["db"].connection()
        return [dict(r) for r in conn.execute(
            "SELECT tx_hash, status, amount, block_number FROM transfers WHERE process_id = ?"
            " ORDER BY block_number, log_index", (process_id,))]
