"""The demo shop's test wallet: a funded dev account of a local EVM node (Hardhat), driven over
JSON-RPC so a person can watch an on-chain payment end to end without a wallet app.

Nothing is signed here: a Hardhat node keeps its dev accounts unlocked, so `eth_sendTransaction`
from them works without keys. Demo only (the shop with DEMO_WALLET_RPC_URL set, and `demo-chain`):
never point it at a real network.
"""
import json
from dataclasses import dataclass

from app.evm.logs import transfer_calldata
from app.evm.rpc import Client, RpcError, quantity, word

BALANCE_OF = "70a08231"  # balanceOf(address)
SENDER_INDEX = 0  # the dev account that deployed the test token holds its supply
DEMO_TOKEN_SUPPLY = 10**15  # base units: a billion tokens of 6 decimals


class WalletRequestError(Exception):
    """An EIP-1193 error of the shop's browser wallet: `code` as a wallet gives it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Sent:
    tx_hash: str
    block_number: int


def _word(hex_digits: str) -> str:
    return hex_digits.rjust(64, "0")


class DemoWallet:
    def __init__(self, rpc_url, *, timeout=(3, 10)):
        self.client = Client(rpc_url, timeout=timeout)

    def sender(self) -> str:
        accounts = self.client.call("eth_accounts")
        if not isinstance(accounts, list) or len(accounts) <= SENDER_INDEX:
            raise RpcError("eth_accounts: the node has no unlocked dev account")
        return accounts[SENDER_INDEX]

    def head(self) -> int:
        return self.client.block_number()

    def balance(self, token: str, owner: str) -> int:
        data = "0x" + BALANCE_OF + _word(owner[2:].lower())
        return word(self.client.call("eth_call", [{"to": token, "data": data}, "latest"]),
                    "balanceOf")

    def transfer(self, token: str, to: str, amount: int, sender: str | None = None) -> Sent:
        """An ERC-20 transfer of `amount` base units from the dev account (or `sender`, another
        unlocked account of the node), mined by the node."""
        data = transfer_calldata(to, amount)
        return self._send({"from": sender or self.sender(), "to": token, "data": data})

    def impersonate(self, address: str):
        """Let the node send from `address` (a Hardhat node only) with gas coin to pay for it: the
        order's deposit address, whose key the merchant's own wallet holds."""
        self.client.call("hardhat_impersonateAccount", [address])
        self.client.call("hardhat_setBalance", [address, hex(10**18)])

    def unlocked(self, address: str) -> bool:
        """Whether the node signs for `address` (one of its dev accounts)."""
        accounts = self.client.call("eth_accounts")
        return isinstance(accounts, list) and address.lower() in {str(a).lower() for a in accounts}

    def request(self, method, params, account=None):
        """The shop's browser wallet (EIP-1193, announced to the page by EIP-6963): the few requests
        the payment button makes, answered for the dev account on the node's own chain (or
        `account`, another account the node signs for: the merchant's wallet in the console). The
        node signs (its dev accounts are unlocked); nothing is sent from any other account."""
        if method in ("eth_requestAccounts", "eth_accounts"):
            return [account or self.sender()]
        if method == "eth_chainId":
            return hex(self.client.chain_id())
        if method == "wallet_switchEthereumChain":
            wanted = params[0].get("chainId") if params and isinstance(params[0], dict) else None
            if wanted != hex(self.client.chain_id()):
                raise WalletRequestError(4902, "The test wallet knows only chain"
                                               f" {self.client.chain_id()}.")
            return None
        if method == "eth_sendTransaction" and params and isinstance(params[0], dict):
            tx = {"from": account or self.sender(), "to": params[0].get("to"),
                  "data": params[0].get("data")}
            return self._send(tx).tx_hash
        if method == "eth_signTypedData_v4" and len(params) == 2:
            return self.client.call("eth_signTypedData_v4", [account or self.sender(), params[1]])
        raise WalletRequestError(4200, f"The test wallet does not support {method}.")

    def mine(self, blocks=1) -> int:
        """`blocks` empty blocks, one evm_mine each, in one batch: hardhat_mine's several blocks at
        once carry zero parent hashes, and the watcher proves a payment's block by them."""
        if blocks > 0:
            self.client.batch([("evm_mine", [])] * blocks)
        return self.head()

    def deploy_token(self, build_path, supply=DEMO_TOKEN_SUPPLY) -> str:
        """Deploy the test token compiled at `build_path` ({abi, bytecode}, tests/chain/compile.js);
        its address. The dev account receives the whole supply."""
        with open(build_path) as f:
            bytecode = json.load(f)["bytecode"]
        receipt = self._receipt(self.client.call(
            "eth_sendTransaction",
            [{"from": self.sender(), "data": bytecode + _word(format(supply, "x"))}]))
        return receipt["contractAddress"]

    def deploy_feed(self, build_path, description, answer, decimals=8) -> str:
        """Deploy the test price feed compiled at `build_path`
        (tests/chain/token/TestPriceFeed.json, a Chainlink-style AggregatorV3Interface) answering
        `answer` (with `decimals`); its address."""
        from eth_abi import encode
        with open(build_path) as f:
            bytecode = json.load(f)["bytecode"]
        args = encode(["uint8", "string", "int256"], [decimals, description, answer]).hex()
        receipt = self._receipt(self.client.call(
            "eth_sendTransaction", [{"from": self.sender(), "data": bytecode + args}]))
        return receipt["contractAddress"]

    def _send(self, tx) -> Sent:
        receipt = self._receipt(self.client.call("eth_sendTransaction", [tx]))
        return Sent(tx_hash=receipt["transactionHash"],
                    block_number=quantity(receipt["blockNumber"], "blockNumber"))

    def _receipt(self, tx_hash):
        receipt = self.client.call("eth_getTransactionReceipt", [tx_hash])
        if not isinstance(receipt, dict) or receipt.get("status") != "0x1":
            raise RpcError("the transaction failed or was not mined (is the node automining?)")
        return receipt
