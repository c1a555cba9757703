"""Fixtures of the Button API's live-payment tests that need no node (test_live_payments_api.py,
test_payout_setup.py, test_refunds_api.py); their helpers are in support/live_payments.py."""
import pytest
from support.chain_shop import XPUB, cli
from support.live_payments import (
    DAI_LOCAL,
    USDC_LOCAL,
    USDC_TEST,
    ZERO_DEC_LOCAL,
    Button,
)


@pytest.fixture
def chains(runner):
    """Two enabled networks and one disabled, USDC on two of them, DAI (18 decimals), a 0-decimal
    token; added without asking a node (--start-block, --skip-contract-check)."""
    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "networks", "add", "testnet", "--name", "Test net", "--chain-id", "11155111",
        "--rpc-url", "https://rpc.example/v3/SECRETKEY", "--start-block", "100")
    cli(runner, "networks", "add", "gone", "--name", "Gone", "--chain-id", "5",
        "--rpc-url", "https://rpc.example/", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL.lower(), "--decimals", "6", "--skip-contract-check")
    cli(runner, "assets", "add", "usdc", "--network", "testnet", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_TEST, "--decimals", "6", "--skip-contract-check")
    cli(runner, "assets", "add", "dai", "--network", "local", "--symbol", "DAI", "--name", "Dai",
        "--contract", DAI_LOCAL, "--decimals", "18", "--skip-contract-check")
    cli(runner, "assets", "add", "whole", "--network", "local", "--symbol", "WHL", "--name",
        "Whole token", "--contract", ZERO_DEC_LOCAL, "--decimals", "0", "--skip-contract-check")
    cli(runner, "assets", "add", "usdc", "--network", "gone", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_TEST, "--decimals", "6", "--skip-contract-check")
    cli(runner, "networks", "disable", "gone")


@pytest.fixture
def wallet(runner, merchant, chains):
    """The merchant with support.chain_shop.XPUB as its wallet (the deposit addresses
    ADDRESS_0…)."""
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    return merchant


@pytest.fixture
def button(client, merchant):
    return Button(client, merchant["publicKey"])
