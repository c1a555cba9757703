"""The forwarder factory (app/chain/contracts/ForwarderFactory.sol) on the real Hardhat node: the
committed build is what the pinned compiler makes; deposit addresses computed in Python are where the
factory creates its forwarders; whatever reaches an address (tokens with or without a boolean answer,
the gas coin, before or after a collection) goes to that address's payout and nowhere else, whoever
calls with whatever arguments."""
import json
import os
import shutil
import subprocess

import pytest
from eth_abi import decode, encode
from eth_account import Account

from app.chain import forwarder
from app.chain.addresses import keccak256, to_checksum_address
from chain_node import CHAIN_DIR

# keccak256 of the Forwarder's creation code: every deposit address handed out depends on it, so a
# change to the contract or its compile settings must be deliberate (a new factory on every network).
FORWARDER_CODE_HASH = None

ETHER = 10**18


def selector(signature: str) -> bytes:
    return keccak256(signature.encode("ascii"))[:4]


def call_data(signature: str, types: list, values: list) -> str:
    return "0x" + (selector(signature) + encode(types, values)).hex()


class Contracts:
    """The node, plus deploying the test contracts and reading balances."""

    def __init__(self, chain):
        self.chain = chain
        self.deployer = chain.accounts[0]

    def deploy(self, code: bytes) -> str:
        tx_hash = self.chain.rpc("eth_sendTransaction", {"from": self.deployer, "data": "0x" + code.hex()})
        receipt = self.chain.rpc("eth_getTransactionReceipt", tx_hash)
        assert receipt["status"] == "0x1", receipt
        return to_checksum_address(receipt["contractAddress"])

    def deploy_build(self, name: str, *args: int) -> str:
        build = json.loads((CHAIN_DIR / "build" / f"{name}.json").read_text())
        return self.deploy(bytes.fromhex(build["bytecode"][2:]) + encode(["uint256"] * len(args), list(args)))

    def token_balance(self, token: str, holder: str) -> int:
        answer = self.chain.rpc("eth_call", {"to": token, "data": call_data("balanceOf(address)", ["address"],
                                                                             [holder])}, "latest")
        return int(answer, 16)

    def coin_balance(self, holder: str) -> int:
        return int(self.chain.rpc("eth_getBalance", holder, "latest"), 16)

    def code(self, address: str) -> bytes:
        return bytes.fromhex(self.chain.rpc("eth_getCode", address, "latest")[2:])

    def give(self, token: str, to: str, amount: int):
        self.chain.send(self.deployer, token, call_data("transfer(address,uint256)", ["address", "uint256"],
                                                        [to, amount]))

    def give_coin(self, to: str, amount: int):
        self.chain.send(self.deployer, to, value=amount)

    def try_send(self, sender: str, to: str, data: str, value: int = 0, gas: int = 5_000_000):
        """A transaction that may fail: its receipt's status (True: success), never raising on a revert."""
        tx_hash = self.chain.rpc("eth_sendTransaction", {"from": sender, "to": to, "data": data,
                                                         "value": hex(value), "gas": hex(gas)})
        return self.chain.rpc("eth_getTransactionReceipt", tx_hash)["status"] == "0x1"


@pytest.fixture
def env(chain):
    contracts = Contracts(chain)
    contracts.factory = contracts.deploy(forwarder.factory_creation_code())
    contracts.usd = to_checksum_address(chain.token)
    return contracts


def test_collect_smoke(env):
    payout = to_checksum_address(env.chain.accounts[1])
    s = forwarder.salt("proc_1")
    address = forwarder.deposit_address(env.factory, payout, s)
    env.give(env.usd, address, 1234)
    before = env.token_balance(env.usd, payout)
    stranger = env.chain.accounts[7]
    env.chain.send(stranger, env.factory, "0x" + forwarder.collect_calldata([env.usd], [(payout, s)]).hex())
    assert env.token_balance(env.usd, address) == 0
    assert env.token_balance(env.usd, payout) == before + 1234
    assert env.code(address) == b""
