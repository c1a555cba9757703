"""Operator setup of live payments: the networks (their nodes, finality and modes), the assets on
them (ERC-20 tokens, read from their contracts before they are added), and merchants' xpubs. The
operator's CLI (app/cli/chain.py, app/cli/merchants.py) and the console's settings call it; the
Button API (payments.py) and the pages read the networks and assets it keeps.

Decisions are in docs/payments.md ("Addresses and the API").
"""
import re
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from app.core import currency
from app.core.money import format_units
from app.core.records import Asset, Network
from app.core.testnets import LIVE_CHAIN_IDS, TEST_CHAIN_IDS
from app.data import merchants as merchant_rows
from app.data import payments as payment_rows
from app.domain import health
from app.evm import addresses, eip3009, rpc, tokens

ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
ID_RULE = "1-32 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit"

FINALITY_MODES = ("confirmations",) + rpc.TAGS


class SetupError(ValueError):
    """An operator's setup command cannot be done; str() says why."""


def _check_id(value, what):
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise SetupError(f"{what} must be {ID_RULE}.")


def add_network(db, *, network_id, name, chain_id, rpc_url, confirmations, start_block, now,
                testnet=False, finality="confirmations", max_block_age=None,
                max_fee_per_gas=None, client_factory=rpc.Client) -> Network:
    """Enable a network. The node is asked for its chain id, which must be the one given (a node
    of another chain is refused), and, without `start_block`, for its head: the watcher then reads
    from the next block on. With `start_block` a node that cannot be asked now is accepted (it may
    be down for a while): the watcher checks its chain id on every poll. `testnet`: a test network
    (test-mode merchants only); a well-known test chain id is one anyway (app/core/testnets.py).
    `finality` "safe" or "finalized": the node must serve that block now (`check_tag`).
    `max_block_age`: seconds (None: off). `max_fee_per_gas`: wei (None: no ceiling; max_fee_wei)."""
    _check_finality(finality)
    _check_max_block_age(max_block_age)
    _check_max_fee(max_fee_per_gas)
    _check_id(network_id, "The network id")
    if not name or not name.strip():
        raise SetupError("The network's name must not be empty.")
    if chain_id < 1:
        raise SetupError("The chain id must be a positive integer (EIP-155).")
    if confirmations < 1:
        raise SetupError("Confirmations must be at least 1 (the transfer's own block).")
    if not re.match(r"https?://[^/\s]", rpc_url or ""):
        raise SetupError("The RPC URL must be an http:// or https:// URL.")
    if start_block is not None and start_block < 0:
        raise SetupError("The start block must be 0 or more.")
    head, node_chain_id = None, None
    client = client_factory(rpc_url)
    try:
        node_chain_id = client.chain_id()
        if start_block is None:
            head = client.block_number()
    except rpc.RpcError as e:
        if start_block is None:
            raise SetupError(f"Could not ask the node for its head: {e}. Give --start-block to add"
                             " the network without asking it.") from None
    if node_chain_id is not None and node_chain_id != chain_id:
        raise SetupError(f"The node at {rpc.redacted(rpc_url)} serves chain id {node_chain_id},"
                         f" not {chain_id}.")
    if finality in rpc.TAGS:
        check_tag(client, rpc_url, finality)
    if start_block is None:
        start_block = head + 1
    network = Network(
        id=network_id, name=name.strip(), chain_id=chain_id, rpc_url=rpc_url,
        confirmations=confirmations, start_block=start_block, scanned_block=start_block - 1,
        head_block=head if head is not None else start_block - 1, disabled_at=None, created_at=now,
        testnet=bool(testnet), finality=finality, max_block_age=max_block_age, ok_since=now,
        max_fee_per_gas=max_fee_per_gas,
    )
    with db.transaction() as conn:
        if payment_rows.get_network(conn, network_id) is not None:
            raise SetupError(f"A network {network_id} already exists.")
        if payment_rows.network_with_chain_id(conn, chain_id) is not None:
            raise SetupError(f"A network with chain id {chain_id} already exists.")
        payment_rows.insert_network(conn, network)
    return network


def network(db, network_id) -> Network | None:
    return payment_rows.get_network(db.connection(), network_id)


def _check_finality(finality):
    if finality not in FINALITY_MODES:
        raise SetupError(f"The finality must be one of {', '.join(FINALITY_MODES)}.")


def _check_max_block_age(seconds):
    if seconds is not None and seconds < 1:
        raise SetupError("The maximum block age must be at least 1 second.")


def check_tag(client, rpc_url, tag):
    """SetupError unless the node serves its block of `tag` ("safe", "finalized") now."""
    try:
        client.tag_header(tag)
    except rpc.RpcError as e:
        raise SetupError(f"The node at {rpc.redacted(rpc_url)} does not serve the \"{tag}\" block"
                         f" ({e}): choose another finality, or another node.") from None


def set_finality(db, network_id, finality, client_factory=rpc.Client) -> Network:
    """How transfers count on the network from the next poll on: by confirmations, or by the
    node's "safe" or "finalized" block, which the node must serve now (SetupError otherwise)."""
    _check_finality(finality)
    network = payment_rows.get_network(db.connection(), network_id)
    if network is None:
        raise SetupError(f"No network {network_id}.")
    if finality in rpc.TAGS:
        check_tag(client_factory(network.rpc_url), network.rpc_url, finality)
    with db.transaction() as conn:
        if not payment_rows.set_finality(conn, network_id, finality):
            raise SetupError(f"No network {network_id}.")
    return replace(network, finality=finality)


def set_max_block_age(db, network_id, seconds) -> Network:
    """A head block older than `seconds` makes the network unavailable (None: never)."""
    _check_max_block_age(seconds)
    with db.transaction() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None or not payment_rows.set_max_block_age(conn, network_id, seconds):
            raise SetupError(f"No network {network_id}.")
    return replace(network, max_block_age=seconds)


def max_fee_wei(gwei_text) -> int | None:
    """A ceiling given in gwei (an exact decimal, at most 9 decimal places: "50", "0.05") as wei;
    "0" or "off": none."""
    text = str(gwei_text).strip().lower()
    if text in ("0", "off", "none"):
        return None
    try:
        wei = Decimal(text) * 10**9
    except InvalidOperation:
        wei = None
    if wei is None or not wei.is_finite() or wei != wei.to_integral_value() or wei <= 0:
        raise SetupError("The maximum fee must be a positive number of gwei with at most 9 decimal"
                         " places (e.g. 50 or 0.05), or 0 (off).")
    return int(wei)


def _check_max_fee(wei):
    if wei is not None and (wei < 1 or wei >= 2**63):
        raise SetupError("The maximum fee must be at least 1 wei per gas.")


def set_max_fee(db, network_id, wei) -> Network:
    """The operator's ceiling on what a transaction sent on the network (the relayer's, `collect`'s,
    the factory's deployment) may pay per gas: nothing is sent above it (None: no ceiling)."""
    _check_max_fee(wei)
    with db.transaction() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None or not payment_rows.set_max_fee_per_gas(conn, network_id, wei):
            raise SetupError(f"No network {network_id}.")
    return replace(network, max_fee_per_gas=wei)


def network_health(db, now, stale_seconds) -> list[tuple[Network, health.Health]]:
    """Every enabled network with its health (app/domain/health.py), by id."""
    return [(n, health.of(n, now, stale_seconds))
            for n in payment_rows.enabled_networks(db.connection())]


def network_state(db, network_id, now, stale_seconds) -> str:
    """"ok" or "unavailable" (a disabled network, no longer read, is unavailable too)."""
    network = payment_rows.get_network(db.connection(), network_id)
    if network is None or network.disabled_at is not None:
        return health.UNAVAILABLE
    return health.of(network, now, stale_seconds).state


def list_networks(db):
    return payment_rows.list_networks(db.connection())


def disable_network(db, network_id, now) -> Network:
    """Stop offering a network to customers; payments already confirmed on it keep their choice."""
    with db.transaction() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None:
            raise SetupError(f"No network {network_id}.")
        if not payment_rows.disable_network(conn, network_id, now):
            raise SetupError(f"Network {network_id} is already disabled.")
    return replace(network, disabled_at=now)


def set_network_mode(db, network_id, mode) -> tuple[Network, int]:
    """Make a network a test (`mode` "test") or a live one ("live"; refused for a well-known test
    chain id, which is test whatever the flag). (The network as it is now, the pending processes of
    the other mode chosen on it, whose payments there the watcher no longer credits.)"""
    with db.transaction() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None:
            raise SetupError(f"No network {network_id}.")
        if mode == "live" and network.chain_id in TEST_CHAIN_IDS:
            raise SetupError(f"Network {network_id} is on chain id {network.chain_id}, a well-known"
                             " test chain: it stays a test network.")
        testnet = mode == "test"
        payment_rows.set_testnet(conn, network_id, testnet)
        network = replace(network, testnet=testnet)
        stranded = payment_rows.pending_chosen_on(conn, network_id, livemode=network.is_test)
    return network, stranded


def networks_of_unknown_mode(db, version_before) -> list[Network]:
    """After init-db upgraded a database from a release without test and live modes (before
    version 3): the networks it kept out of live mode, their chain id being neither a well-known
    test chain's nor a well-known live one's (app/data/schema.py)."""
    if version_before >= 3:
        return []
    return [n for n in payment_rows.list_networks(db.connection())
            if n.testnet and n.chain_id not in TEST_CHAIN_IDS | LIVE_CHAIN_IDS]


def add_asset(db, *, asset_id, network_id, symbol, name, contract, decimals, now, eip3009=False,
              check_contract=True, client_factory=rpc.Client, peg="USD") -> Asset:
    """Let customers pay with a token on a network. The contract's own `decimals()` and `symbol()`
    are read through the network's node and must be `decimals` and `symbol` (`_check_token`), unless
    `check_contract` is false (the node cannot be reached: the operator vouches for them).
    `eip3009`: payable without gas (ERC-3009): the token's EIP-712 domain is read from the contract
    too and checked (app/evm/eip3009.py); a contract that is not an ERC-3009 token is refused."""
    _check_id(asset_id, "The asset id")
    if not currency.is_known(peg):
        raise SetupError(f"The peg must be an ISO 4217 currency code in use (e.g. USD, EUR), not"
                         f" {str(peg)[:8]!r}.")
    if not symbol or not symbol.strip() or len(symbol) > 16:
        raise SetupError("The symbol must be 1-16 characters.")
    if not name or not name.strip():
        raise SetupError("The asset's name must not be empty.")
    if not 0 <= decimals <= 36:
        raise SetupError("Decimals must be between 0 and 36.")
    if not addresses.is_checksum_valid(contract or ""):
        raise SetupError("The contract must be 0x followed by 40 hexadecimal digits, with a valid"
                         " EIP-55 checksum when it mixes upper and lower case.")
    if eip3009 and not check_contract:
        raise SetupError("--eip3009 reads the token's EIP-712 domain through the network's node: it"
                         " cannot be added without asking the node.")
    contract = addresses.to_checksum_address(contract)
    symbol = symbol.strip()
    domain = None
    if check_contract or eip3009:
        network = payment_rows.get_network(db.connection(), network_id)
        if network is None:
            raise SetupError(f"No network {network_id} (networks add it first).")
        client = client_factory(network.rpc_url)
        _check_token(client, network, contract, symbol, decimals)
        domain = _eip3009_domain(client, network, contract) if eip3009 else None
    asset = Asset(id=asset_id, network_id=network_id, symbol=symbol, name=name.strip(),
                  contract=contract, decimals=decimals, disabled_at=None, created_at=now,
                  eip3009_name=domain and domain.name, eip3009_version=domain and domain.version,
                  peg=peg)
    with db.transaction() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None:
            raise SetupError(f"No network {network_id} (networks add it first).")
        if payment_rows.get_asset(conn, asset_id, network_id) is not None:
            raise SetupError(f"Asset {asset_id} already exists on network {network_id}.")
        if payment_rows.asset_with_contract(conn, network_id, contract) is not None:
            raise SetupError(f"Contract {contract} is already an asset on network {network_id}.")
        payment_rows.insert_asset(conn, asset)
    return asset


def _check_token(client, network, contract, symbol, decimals):
    """SetupError unless the contract, asked through the network's node (after its chain id, in
    the same batch), answers `decimals()` = `decimals` and `symbol()` = `symbol` (exactly: it is
    what the customer's wallet shows beside the amount)."""
    where = rpc.redacted(network.rpc_url)
    try:
        found_symbol, found_decimals = tokens.read(client, contract, network.chain_id)
    except rpc.WrongChain as e:
        raise SetupError(f"The node at {where} does not serve network {network.id}: {e}.") from None
    except rpc.RpcError as e:
        raise SetupError(
            f"Could not read decimals() and symbol() of {contract} through the node of network"
            f" {network.id}: {e}. Check the contract address; if the node cannot be reached now,"
            " --skip-contract-check adds the asset unchecked.") from None
    if found_decimals is None:
        raise SetupError(f"The contract {contract} on network {network.id} answers no decimals():"
                         " it is not an ERC-20 token (check the address and the network).")
    if found_decimals != decimals:
        raise SetupError(
            f"The contract {contract} on network {network.id} has {found_decimals} decimals, not"
            f" {decimals}: an order of 100 would be due"
            f" {format_units(100 * 10**decimals, found_decimals)} on chain. Give --decimals"
            f" {found_decimals}.")
    if found_symbol is None:
        raise SetupError(f"The contract {contract} on network {network.id} answers no symbol() of"
                         " short printable text: check the address and the network.")
    if found_symbol != symbol:
        raise SetupError(f"The contract {contract} on network {network.id} is {found_symbol!r}, not"
                         f" {symbol!r}: check the address, or give --symbol {found_symbol} (what"
                         " the customer's wallet shows).")


def _eip3009_domain(client, network, contract):
    try:
        return eip3009.read_domain(client, contract, network.chain_id)
    except eip3009.Eip3009Error as e:
        raise SetupError(f"--eip3009 refused: {e}") from None
    except rpc.RpcError as e:
        raise SetupError(f"Could not read the token's EIP-712 domain from the node: {e}.") from None


def list_assets(db):
    return payment_rows.list_assets(db.connection())


def asset(db, asset_id, network_id) -> Asset | None:
    return payment_rows.get_asset(db.connection(), asset_id, network_id)


def asset_with_contract(db, network_id, contract) -> Asset | None:
    """The registered asset of that token contract on the network (any case), or None."""
    return payment_rows.asset_with_contract(db.connection(), network_id, contract)


def has_xpub(db, merchant_id) -> bool:
    """Whether the merchant registered its wallet (the xpub mode); the xpub itself is never
    shown."""
    return payment_rows.get_wallet(db.connection(), merchant_id) is not None


def set_xpub(db, merchant_id, text, now) -> str:
    """Register or replace a merchant's account xpub; returns its first deposit address (index 0),
    for the merchant to compare with its wallet. Address indexes already given out stay given."""
    xpub = addresses.parse_xpub(text)  # XpubError, its message never quoting the key
    first_address = addresses.deposit_address(xpub, 0)
    with db.transaction() as conn:
        if merchant_rows.get(conn, merchant_id) is None:
            raise SetupError(f"No merchant {merchant_id}.")
        holders = {payment_rows.wallet_holding(conn, text) for text in addresses.spellings(xpub)}
        if holders - {None, merchant_id}:
            raise SetupError(
                "Another merchant already registered this xpub: two merchants sharing one wallet"
                " would be given the same deposit addresses."
            )
        payment_rows.set_wallet(conn, merchant_id, xpub, now)
    return first_address
