"""Operator setup of live payments: `networks add/list/disable`, `assets add/list`,
`merchants set-xpub`. `networks add` without --start-block asks the node: here a tiny JSON-RPC
responder on loopback (real HTTP), answering what a node answers, or failing as one can."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from bip32.base58 import b58decode_check, b58encode_check
from support import dbutil

from app.evm import tokens

XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6"
        "si3yZdUsT8ddYM3PwnATt")
XPRV = ("xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNN"
        "U3TGtRBeJgk33yuGBxrMPHi")
USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


class Node:
    """Answers eth_chainId and eth_blockNumber; `mode` makes it fail instead."""

    def __init__(self):
        self.chain_id, self.head, self.mode, self.calls = 31337, 0x1234, "ok", []
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                node.calls.append((self.path, request["method"]))
                result = {"eth_chainId": hex(node.chain_id), "eth_blockNumber": hex(node.head)}
                if node.mode == "error":
                    body = {"jsonrpc": "2.0", "id": request["id"],
                            "error": {"code": -32000, "message": "rate limited"}}
                elif node.mode == "garbage":
                    body = None
                else:
                    body = {"jsonrpc": "2.0", "id": request["id"],
                            "result": result[request["method"]]}
                data = b"<html>" if body is None else json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v3/PROVIDER-KEY"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def node():
    n = Node()
    yield n
    n.server.shutdown()
    n.server.server_close()


def invoke(runner, *args, input=None):
    return runner.invoke(args=list(args), input=input)


def add_local(runner, url, *extra):
    return invoke(runner, "networks", "add", "local", "--name", "Local", "--chain-id", "31337",
                  "--rpc-url", url, *extra)


def rows(app, sql, *params):
    conn = dbutil.open_connection(app.config["DATABASE"])
    try:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def test_networks_add_asks_the_node_for_its_head(runner, node, app, clock):
    result = add_local(runner, node.url, "--max-fee-gwei", "0.05", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "id": "local", "name": "Local", "chainId": 31337, "testnet": True,
        "rpcUrl": f"http://127.0.0.1:{node.server.server_port}", "confirmations": 12,
        "finality": "confirmations", "maxBlockAge": None, "maxFeeGwei": "0.05",
        "startBlock": 0x1235, "scannedBlock": 0x1234, "headBlock": 0x1234, "enabled": True,
        "state": "ok", "stateSince": "2026-11-18T11:06:40Z", "createdAt": "2026-11-18T11:06:40Z",
    }
    assert node.calls == [("/v3/PROVIDER-KEY", "eth_chainId"),
                          ("/v3/PROVIDER-KEY", "eth_blockNumber")]
    assert rows(app, "SELECT rpc_url FROM networks") == [(node.url,)]


def test_networks_add_with_start_block_asks_the_chain_id_only(runner, node):
    result = add_local(runner, node.url, "--start-block", "7", "--confirmations", "3")
    assert result.exit_code == 0, result.output
    assert result.output == (f"Added test network local (Local, chain id 31337) via"
                             f" http://127.0.0.1:{node.server.server_port}; 3 confirmations;"
                             f" reading from block 7.\n")
    assert node.calls == [("/v3/PROVIDER-KEY", "eth_chainId")]


@pytest.mark.parametrize("mode", ["error", "garbage", "down"])
def test_networks_add_with_start_block_accepts_a_node_that_cannot_answer_now(runner, node, app,
                                                                             mode):
    """It may be down for a while: the watcher asks for its chain id on every poll."""
    node.mode = mode
    url = "http://127.0.0.1:1/v3/PROVIDER-KEY" if mode == "down" else node.url
    result = add_local(runner, url, "--start-block", "7")
    assert result.exit_code == 0, result.output
    assert rows(app, "SELECT id, chain_id, start_block FROM networks") == [("local", 31337, 7)]


def test_networks_add_with_start_block_refuses_a_node_of_another_chain(runner, node, app):
    node.chain_id = 137
    result = add_local(runner, node.url, "--start-block", "7")
    assert result.exit_code == 1
    assert result.output == (f"Error: The node at http://127.0.0.1:{node.server.server_port} serves"
                             " chain id 137, not 31337.\n")
    assert rows(app, "SELECT count(*) FROM networks") == [(0,)]


@pytest.mark.parametrize("chain_id, flag, testnet", [
    (31337, [], True), (11155111, [], True), (84532, [], True), (137, [], False),
    (137, ["--testnet"], True), (999999, ["--testnet"], True), (999999, [], False),
])
def test_networks_add_testnet_by_flag_or_well_known_chain_id(runner, node, app, chain_id, flag,
                                                             testnet):
    node.chain_id = chain_id
    result = invoke(runner, "networks", "add", "n", "--name", "N", "--chain-id", str(chain_id),
                    "--rpc-url", node.url, "--json", *flag)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["testnet"] is testnet
    assert rows(app, "SELECT testnet FROM networks") == [(1 if flag else 0,)]  # the flag as given
    listed = invoke(runner, "networks", "list").output.splitlines()
    assert listed[1].split()[3] == ("test" if testnet else "live")


def test_the_well_known_test_chain_ids():
    """The constant the contract's list names, and the common public testnets; the well-known live
    chains (the mainnets) are none of them."""
    from app.core.testnets import LIVE_CHAIN_IDS, TEST_CHAIN_IDS
    assert {31337, 1337, 11155111, 17000, 560048, 80002, 84532, 421614, 11155420, 97} \
        <= TEST_CHAIN_IDS
    assert {1, 10, 56, 137, 8453, 42161, 43114} <= LIVE_CHAIN_IDS
    assert not LIVE_CHAIN_IDS & TEST_CHAIN_IDS


@pytest.mark.parametrize("mode, chain_id, message", [
    ("ok", 1, "serves chain id 31337, not 1."),
    ("error", 31337, "Could not ask the node for its head: eth_chainId: http://127.0.0.1:{port}"
                     " error -32000: rate limited. Give --start-block"),
    ("garbage", 31337, "Could not ask the node for its head: eth_chainId: http://127.0.0.1:{port}"
                       " answered malformed JSON."),
])
def test_networks_add_refuses_when_the_node_disagrees_or_fails(runner, node, app, mode, chain_id,
                                                               message):
    node.mode = mode
    result = invoke(runner, "networks", "add", "local", "--name", "Local", "--chain-id",
                    str(chain_id), "--rpc-url", node.url)
    assert result.exit_code == 1
    assert message.format(port=node.server.server_port) in result.output
    assert "PROVIDER-KEY" not in result.output  # the URL's path may be an API key
    assert rows(app, "SELECT count(*) FROM networks") == [(0,)]


def test_networks_add_unreachable_node(runner):
    result = add_local(runner, "https://127.0.0.1:1/secret-path")
    assert result.exit_code == 1
    assert ("Error: Could not ask the node for its head: eth_chainId: https://127.0.0.1:1"
            " unreachable (ConnectionError). Give --start-block to add the network without"
            " asking it.\n"
            == result.output)


@pytest.mark.parametrize("args, message", [
    (["Local", "--name", "L", "--chain-id", "1", "--rpc-url", "http://x", "--start-block", "1"],
     "The network id must be 1-32 characters"),
    (["l", "--name", " ", "--chain-id", "1", "--rpc-url", "http://x", "--start-block", "1"],
     "The network's name must not be empty."),
    (["l", "--name", "L", "--chain-id", "0", "--rpc-url", "http://x", "--start-block", "1"],
     "The chain id must be a positive integer (EIP-155)."),
    (["l", "--name", "L", "--chain-id", "1", "--rpc-url", "ws://x", "--start-block", "1"],
     "The RPC URL must be an http:// or https:// URL."),
    (["l", "--name", "L", "--chain-id", "1", "--rpc-url", "http://x", "--confirmations", "0",
      "--start-block", "1"], "Confirmations must be at least 1"),
    (["l", "--name", "L", "--chain-id", "1", "--rpc-url", "http://x", "--start-block", "-1"],
     "The start block must be 0 or more."),
])
def test_networks_add_refuses_bad_input(runner, args, message):
    result = invoke(runner, "networks", "add", *args)
    assert result.exit_code == 1 and message in result.output


def test_networks_duplicates_list_and_disable(runner, app):
    assert add_local(runner, "https://rpc.example/KEY", "--start-block", "5").exit_code == 0
    again = add_local(runner, "https://rpc.example/KEY", "--start-block", "5")
    assert again.exit_code == 1 and "A network local already exists." in again.output
    same_chain = invoke(runner, "networks", "add", "other", "--name", "O", "--chain-id", "31337",
                        "--rpc-url", "https://rpc.example/", "--start-block", "5")
    assert same_chain.exit_code == 1 \
        and "A network with chain id 31337 already exists." in same_chain.output
    listed = invoke(runner, "networks", "list")
    assert listed.output.splitlines() == [
        "ID     NAME   CHAIN ID  MODE  RPC                  CONFIRMATIONS  FINALITY       SCANNED  "
        "HEAD  STATE    HEALTH",
        "local  Local  31337     test  https://rpc.example  12             confirmations  4        "
        "4     enabled  ok",
    ]
    assert invoke(runner, "networks", "disable", "local").exit_code == 0
    assert json.loads(invoke(runner, "networks", "list", "--json").output)[0]["enabled"] is False
    twice = invoke(runner, "networks", "disable", "local")
    assert twice.exit_code == 1 and "Network local is already disabled." in twice.output
    unknown = invoke(runner, "networks", "disable", "nope")
    assert unknown.exit_code == 1 \
        and f"No network nope in {runner.app.config['DATABASE']}." in unknown.output


def test_networks_set_mode(runner, app):
    """Either way for a chain id that is not a well-known test chain's; a well-known test chain
    stays test."""
    assert invoke(runner, "networks", "add", "private", "--name", "Private", "--chain-id", "424242",
                  "--rpc-url", "https://rpc.example/", "--start-block", "5").exit_code == 0
    assert add_local(runner, "https://rpc.example/KEY", "--start-block", "5").exit_code == 0

    def modes():
        return {n["id"]: n["testnet"] for n in
                json.loads(invoke(runner, "networks", "list", "--json").output)}

    assert modes() == {"local": True, "private": False}
    test = invoke(runner, "networks", "set-mode", "private", "test")
    assert (test.exit_code, test.output) == (0, "Network private (chain id 424242) is a test"
                                                " network: offered to test-mode merchants only.\n")
    assert modes() == {"local": True, "private": True}
    assert rows(app, "SELECT id, testnet FROM networks ORDER BY id") == [("local", 0),
                                                                          ("private", 1)]
    live = invoke(runner, "networks", "set-mode", "private", "live")
    assert (live.exit_code, live.output) == (0, "Network private (chain id 424242) is a live"
                                                " network: offered to live-mode merchants only.\n")
    assert modes() == {"local": True, "private": False}

    refused = invoke(runner, "networks", "set-mode", "local", "live")
    assert (refused.exit_code, refused.output) == (1, "Error: Network local is on chain id 31337, a"
                                                      " well-known test chain: it stays a test"
                                                      " network.\n")
    assert modes() == {"local": True, "private": False}
    assert invoke(runner, "networks", "set-mode", "local", "test").exit_code == 0
    unknown = invoke(runner, "networks", "set-mode", "nope", "test")
    assert (unknown.exit_code, unknown.output) == (
        1, f"Error: No network nope in {runner.app.config['DATABASE']}.\n")
    wrong = invoke(runner, "networks", "set-mode", "private", "mainnet")
    assert wrong.exit_code == 2 and "'mainnet' is not one of 'test', 'live'" in wrong.output


def test_assets_add_and_list(runner, app, chain):
    """The contract's decimals() and symbol() are read through the network's node: TUSD, the test
    chain's token (at the address USDC names here), has 6 and "TUSD"."""
    add_local(runner, chain.url, "--start-block", "5")
    assert chain.token == USDC.lower()
    result = invoke(runner, "assets", "add", "tusd", "--network", "local", "--symbol", "TUSD",
                    "--name", "Test USD", "--contract", USDC.upper().replace("0X", "0x"),
                    "--decimals", "6", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "id": "tusd", "networkId": "local", "symbol": "TUSD", "name": "Test USD", "contract": USDC,
        "decimals": 6, "enabled": True, "createdAt": "2026-11-18T11:06:40Z", "eip3009": None,
        "peg": "USD",
    }
    assert invoke(runner, "assets", "list").output.splitlines() == [
        "ID    NETWORK  SYMBOL  NAME      CONTRACT                                    "
        "DECIMALS  PEG  STATE",
        f"tusd  local    TUSD    Test USD  {USDC}  6         USD  enabled",
    ]


def _add_tusd(runner, *args):
    return invoke(runner, "assets", "add", "tusd", "--network", "local", "--name", "Test USD",
                  *args)


def test_assets_add_refuses_decimals_or_a_symbol_the_contract_does_not_have(runner, app, chain):
    """A 6-decimal token added with --decimals 2 would make a 19.99 order due 1999 base units,
    0.001999 TUSD on chain, and that would complete it: refused, as is another symbol (the
    customer's wallet shows the contract's), and an address that holds no ERC-20 contract."""
    add_local(runner, chain.url, "--start-block", "5")
    token = chain.token
    wrong_decimals = _add_tusd(runner, "--symbol", "TUSD", "--contract", token, "--decimals", "2")
    assert (wrong_decimals.exit_code, wrong_decimals.output) == (1, (
        f"Error: The contract {USDC} on network local has 6 decimals, not 2: an order of 100 would"
        " be due 0.01 on chain. Give --decimals 6.\n"))
    eighteen = _add_tusd(runner, "--symbol", "TUSD", "--contract", token, "--decimals", "18")
    assert "has 6 decimals, not 18: an order of 100 would be due 100000000000000 on chain" in (
        eighteen.output)
    wrong_symbol = _add_tusd(runner, "--symbol", "USDC", "--contract", token, "--decimals", "6")
    assert (wrong_symbol.exit_code, wrong_symbol.output) == (1, (
        f"Error: The contract {USDC} on network local is 'TUSD', not 'USDC': check the address, or"
        " give --symbol TUSD (what the customer's wallet shows).\n"))
    nobody = _add_tusd(runner, "--symbol", "TUSD", "--contract", chain.accounts[5],
                       "--decimals", "6")
    assert nobody.exit_code == 1 and "answers no decimals(): it is not an ERC-20 token" in (
        nobody.output)
    dai = chain.deploy_named_token("Test Dai", "TDAI", 18)
    tdai = invoke(runner, "assets", "add", "tdai", "--network", "local", "--symbol", "TDAI",
                  "--name", "Test Dai", "--contract", dai, "--decimals", "18")
    assert tdai.exit_code == 0 and "(TDAI, 18 decimals, pegged to USD)" in tdai.output, tdai.output
    assert "its decimals() and symbol() checked" in tdai.output
    assert rows(app, "SELECT id, decimals FROM assets") == [("tdai", 18)]


def test_assets_add_asks_a_node_of_the_network_s_chain_or_is_told_to_skip(runner, app, chain):
    """A node serving another chain id than the network's is not believed about the contract; a
    node that cannot be reached refuses the asset unless the operator vouches for it."""
    add_local(runner, chain.url, "--start-block", "5")
    dbutil.execute(app.config["DATABASE"], "UPDATE networks SET chain_id = 1")  # another chain's
    other = _add_tusd(runner, "--symbol", "TUSD", "--contract", chain.token, "--decimals", "6")
    assert other.exit_code == 1
    assert ("does not serve network local: " in other.output
            and "answers for chain id 31337, not the network's chain id 1" in other.output)
    dbutil.execute(app.config["DATABASE"], "UPDATE networks SET chain_id = 31337,"
                   " rpc_url = 'http://127.0.0.1:1/rpc'")
    down = _add_tusd(runner, "--symbol", "TUSD", "--contract", chain.token, "--decimals", "6")
    assert down.exit_code == 1
    assert (f"Could not read decimals() and symbol() of {USDC} through the node of network local:"
            in down.output and "unreachable" in down.output
            and "--skip-contract-check adds the asset unchecked" in down.output)
    assert rows(app, "SELECT count(*) FROM assets") == [(0,)]
    gasless = _add_tusd(runner, "--symbol", "TUSD", "--contract", chain.token, "--decimals", "6",
                        "--eip3009", "--skip-contract-check")
    assert gasless.exit_code == 1 and "--eip3009 reads the token's EIP-712 domain" in gasless.output
    vouched = _add_tusd(runner, "--symbol", "TUSD", "--contract", chain.token, "--decimals", "6",
                        "--skip-contract-check")
    assert (vouched.exit_code, vouched.output) == (0, (
        f"Added asset tusd (TUSD, 6 decimals, pegged to USD) on local: contract {USDC}"
        " (not checked: you vouch for its decimals and symbol).\n"))


@pytest.mark.parametrize("answer, symbol", [
    ("0x" + "20".rjust(64, "0") + "4".rjust(64, "0") + b"USDC".hex().ljust(64, "0"), "USDC"),
    ("0x" + b"MKR".hex().ljust(64, "0"), "MKR"),  # bytes32, as older tokens answer
    ("0x" + "20".rjust(64, "0") + "7".rjust(64, "0") + "USD\u20ae0".encode().hex().ljust(64, "0"),
     "USD\u20ae0"),
    ("0x" + "40".rjust(64, "0") + "4".rjust(64, "0") + b"USDC".hex().ljust(64, "0"), None),
    ("0x" + "20".rjust(64, "0") + "4".rjust(64, "0") + b"USDC".hex().ljust(62, "0") + "01", None),
    ("0x" + "20".rjust(64, "0") + "5".rjust(64, "0") + b"US\nDC".hex().ljust(64, "0"), None),
    ("0x" + "20".rjust(64, "0") + "2".rjust(64, "0") + "ff00".ljust(64, "0"), None),
    ("0x" + "20".rjust(64, "0") + "40".rjust(64, "0") + b"X".hex() * 64, None),  # too long
    ("0x" + "00" * 32, None), ("0x", None), (None, None), ("0x" + "zz" * 32, None),
])
def test_a_token_symbol_is_short_printable_text(answer, symbol):
    assert tokens.parse_symbol(answer) == symbol


@pytest.mark.parametrize("answer, decimals", [
    ("0x" + "6".rjust(64, "0"), 6), ("0x" + "12".rjust(64, "0"), 18),
    ("0x" + "100".rjust(64, "0"), None), ("0x6", None), ("0x", None),
    ("0x-" + "6".rjust(63, "0"), None),
])
def test_token_decimals_are_one_uint8_word(answer, decimals):
    assert tokens.parse_decimals(answer) == decimals


@pytest.mark.parametrize("args, message", [
    (["usdc", "--network", "nowhere", "--contract", USDC, "--decimals", "6"],
     "No network nowhere in {db} (networks add it first)."),
    (["usdc", "--network", "local", "--contract", USDC[:-1], "--decimals", "6"],
     "The contract must be 0x followed by 40 hexadecimal digits"),
    (["usdc", "--network", "local", "--contract", USDC.replace("F", "f", 1), "--decimals", "6"],
     "with a valid EIP-55 checksum"),
    (["usdc", "--network", "local", "--contract", USDC, "--decimals", "37"],
     "Decimals must be between 0 and 36."),
    (["USDC", "--network", "local", "--contract", USDC, "--decimals", "6"],
     "The asset id must be 1-32 characters"),
    (["usdt", "--network", "local", "--contract", USDC.lower(), "--decimals", "6"],
     f"Contract {USDC} is already an asset on network local."),
    (["usdc", "--network", "local", "--contract", "0x" + "11" * 20, "--decimals", "6"],
     "Asset usdc already exists on network local."),
])
def test_assets_add_refuses_bad_input(runner, args, message):
    add_local(runner, "https://rpc.example/", "--start-block", "5")
    invoke(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
           "USD Coin", "--contract", USDC, "--decimals", "6", "--skip-contract-check")
    result = invoke(runner, "assets", "add", *args[:1], "--symbol", "X", "--name", "X", *args[1:],
                    "--skip-contract-check")
    message = message.replace("{db}", runner.app.config["DATABASE"])
    assert result.exit_code == 1 and message in result.output, result.output


def test_set_xpub_shows_the_first_address_never_the_key(runner, merchant, app):
    result = invoke(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    assert result.exit_code == 0
    assert result.output == (
        f"Registered the wallet of {merchant['merchantId']}. Its first deposit address"
        " (m/44'/60'/0'/0/0) is 0x9858EfFD232B4033E47d90003D41EC34EcaEda94: check that your wallet"
        " shows the same address for the first account of this seed phrase.\n")
    assert rows(app, "SELECT merchant_id, xpub, next_index FROM merchant_wallets") == [
        (merchant["merchantId"], XPUB, 0)]


def test_set_xpub_reads_standard_input(runner, merchant, app):
    result = invoke(runner, "merchants", "set-xpub", merchant["merchantId"], "-", input=XPUB + "\n")
    assert result.exit_code == 0, result.output
    assert XPUB not in result.output
    assert rows(app, "SELECT xpub FROM merchant_wallets") == [(XPUB,)]


def test_set_xpub_refuses_a_private_key(runner, merchant, app):
    result = invoke(runner, "merchants", "set-xpub", merchant["merchantId"], XPRV)
    assert result.exit_code == 1
    assert result.output == (
        "Error: This is an extended PRIVATE key: it controls the merchant's funds and this service"
        " must never be given one. Remove it from wherever it was pasted, and register the"
        " account's extended PUBLIC key (xpub…) instead.\n")
    assert rows(app, "SELECT count(*) FROM merchant_wallets") == [(0,)]


def test_set_xpub_refuses_unknown_merchants_and_shared_wallets(runner, merchant, make_merchant):
    unknown = invoke(runner, "merchants", "set-xpub", "mer_nope", XPUB)
    assert unknown.exit_code == 1 \
        and f"No merchant mer_nope in {runner.app.config['DATABASE']}." in unknown.output
    assert invoke(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB).exit_code == 0
    other = make_merchant(name="Other")
    shared = invoke(runner, "merchants", "set-xpub", other["merchantId"], XPUB)
    assert shared.exit_code == 1
    assert "Another merchant already registered this xpub" in shared.output
    # The same key under the testnet prefix is the same wallet (the same deposit addresses).
    tpub = b58encode_check(bytes.fromhex("043587CF") + b58decode_check(XPUB)[4:]).decode()
    assert tpub != XPUB
    as_tpub = invoke(runner, "merchants", "set-xpub", other["merchantId"], tpub)
    assert as_tpub.exit_code == 1
    assert "Another merchant already registered this xpub" in as_tpub.output
    assert XPUB not in shared.output
    bad = invoke(runner, "merchants", "set-xpub", other["merchantId"], XPUB[:-2])
    assert bad.exit_code == 1 and "Base58Check" in bad.output and XPUB[:-2] not in bad.output
