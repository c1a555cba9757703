"""Live payments through the Button API without a node, as tests/chain/test_live_payments_api.py,
test_payout_setup.py and test_refunds_api.py set them up (their fixtures are in
tests/chain/conftest.py): the networks' token contracts, the merchant's deposit addresses, the
Button API's calls, and the watcher's rows (transfers, a network's head) written into the real
database as the watcher would."""
import json

from support import dbutil

# m/44'/60'/0'/0/0 and /1 of the BIP39 test mnemonic ("abandon … about"): the deposit addresses
# of support.chain_shop.XPUB.
ADDRESS_0 = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
ADDRESS_1 = "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0"
USDC_LOCAL = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
USDC_TEST = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
DAI_LOCAL = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
ZERO_DEC_LOCAL = "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9"


class Button:
    def __init__(self, client, public_key):
        self.client, self.public_key = client, public_key

    def headers(self):
        return {"x-public-key": self.public_key, "Origin": "https://shop.example"}

    def assets(self):
        return self.client.get("/payment-button/assets", headers=self.headers())

    def confirm(self, process_id, asset_id="usdc", network_id="local", body=None):
        data = json.dumps({"assetId": asset_id, "networkId": network_id} if body is None else body)
        return self.client.post(f"/payment-button/process/{process_id}/confirm", data=data,
                                content_type="application/json", headers=self.headers())

    def public(self, process_id):
        return self.client.get(f"/payment-button/process/{process_id}/public",
                               headers=self.headers())

    def qr(self, process_id, headers=None):
        return self.client.get(f"/payment-button/process/{process_id}/qr.svg",
                               headers=self.headers() if headers is None else headers)


def preorder(api, amount=19.99):
    response = api.preorder({"amount": amount, "metadata": {"orderRef": "A-1"}})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def db(app):
    return dbutil.connect(app.config["DATABASE"])


def add_transfer(app, process_id, tx, log_index, amount, block, status, timestamp=1_795_000_100):
    """A transfer as the chain watcher records it."""
    with db(app) as conn:
        conn.execute(
            "INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
            " token_contract, from_address, amount, block_number, block_hash, block_timestamp,"
            " status, seen_at, confirmed_at) VALUES (31337, ?, ?, 'local', ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?)",
            ("0x" + tx * 32, log_index, process_id, USDC_LOCAL, "0x" + "ab" * 20, str(amount),
             block, "0x" + "cd" * 32, timestamp, status, timestamp,
             timestamp if status == "confirmed" else None),
        )


def set_head(app, head):
    with db(app) as conn:
        conn.execute("UPDATE networks SET head_block = ? WHERE id = 'local'", (head,))
