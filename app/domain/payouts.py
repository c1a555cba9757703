"""The payout mode's setup: a merchant's payout address, and each network's forwarder factory
(deployed from an operator's key file, or an existing one checked and set). Collecting the deposits
is app/chain/collect.py; the factory's contract and addresses are app/evm/forwarder.py.

Decisions are in docs/payments.md ("Collecting the funds: the payout mode").
"""
from app.data import merchants as merchant_rows
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.domain.setup import SetupError
from app.evm import addresses, forwarder, rpc
from app.evm.signer import GAS_MARGIN, ChainError, Sender, read_key_file

ZERO_ADDRESS = "0x" + "0" * 40
GAS_COIN = payout_rows.GAS_COIN  # an item's token when it moved the network's gas coin


class UncheckedAddress(SetupError):
    """A well-formed address without an EIP-55 checksum (all lower or all upper case): a mistyped
    character in it cannot be caught, so it is taken only when the caller says it was checked
    (`merchants set-payout --unchecked`, the console's confirmation). str() names the risk; the
    address is `typed` as it was given. Never answered with the checksummed form of what was typed:
    a typo's checksum is as valid as the right address's, so only the wallet's own copy can catch
    it."""

    def __init__(self, what, typed):
        case = "lower" if typed[2:] == typed[2:].lower() else "upper"
        super().__init__(f"{what} {typed} has no EIP-55 checksum (it is all {case} case): a"
                         " mistyped character in it cannot be caught, and what is sent to a"
                         " mistyped address is lost.")
        self.typed = typed


def check_address(text, what="The payout address", *, require_checksum=False) -> str:
    """An address as typed: 0x + 40 hex digits, all-lower (or all-upper) case or a valid EIP-55
    checksum, not the zero address; returned in EIP-55 casing. With `require_checksum`, one not
    written in its EIP-55 form (all lower or all upper case) is UncheckedAddress; mixed case must be
    a valid checksum either way."""
    text = (text or "").strip()
    if not addresses.is_checksum_valid(text):
        if addresses.is_checksum_valid(text.lower()):
            raise SetupError(f"{what} {text} mixes upper and lower case but its EIP-55 checksum is"
                             " wrong: a letter was mistyped. Copy it again from the wallet.")
        raise SetupError(f"{what} must be 0x followed by 40 hexadecimal digits.")
    if int(text, 16) == 0:
        raise SetupError(f"{what} must not be the zero address: what is sent there is lost.")
    checksummed = addresses.to_checksum_address(text)
    # An address of digits only is its own EIP-55 form (nothing to check it by, nothing to ask for).
    if require_checksum and text != checksummed:
        raise UncheckedAddress(what, text)
    return checksummed


def set_payout(db, merchant_id, text, now, *, unchecked=False) -> tuple[str, str | None]:
    """Register or replace the merchant's payout address: (the address, the one it replaces).
    An address without an EIP-55 checksum is UncheckedAddress unless `unchecked` (the caller
    checked it by other means: a typo there sends every payment to a wallet nobody holds).
    Deposit addresses already handed out keep paying the payout they were made for. An address
    another merchant holds (its payout address, or one its deposit addresses forward to) is
    refused: a transfer from it must name one merchant (a refund settles only by its own
    merchant's payment), and one merchant's collections must not land in another's wallet."""
    address = check_address(text, require_checksum=not unchecked)
    with db.transaction() as conn:
        if merchant_rows.get(conn, merchant_id) is None:
            raise SetupError(f"No merchant {merchant_id}.")
        if payout_rows.is_deposit_address(conn, address):
            raise SetupError(f"{address} is a deposit address of this service: a payout address"
                             " must be a wallet of the merchant's own.")
        payout_rows.lock_payout_address(conn, address)
        if payout_rows.merchants_of(conn, [address]).get(address.lower(), set()) - {merchant_id}:
            raise SetupError(f"Another merchant already has {address} as its payout address (or its"
                             " deposit addresses forward to it): two merchants sharing one wallet"
                             " could not tell their refunds and collections apart.")
        previous = payout_rows.get_payout(conn, merchant_id)
        payout_rows.set_payout(conn, merchant_id, address, now)
    return address, previous


def _network(conn, network_id):
    network = payment_rows.get_network(conn, network_id)
    if network is None:
        raise SetupError(f"No network {network_id}.")
    return network


def set_factory(db, network_id, text, now, client_factory=rpc.Client) -> str:
    """Use the factory already deployed at `text` on the network, after checking that the code
    there is this service's factory."""
    factory = check_address(text, "The factory address")
    network = _network(db.connection(), network_id)
    client = client_factory(network.rpc_url)
    try:
        node_chain = client.chain_id()
        code = client.call("eth_getCode", [factory, "latest"])
    except rpc.RpcError as e:
        raise SetupError(f"Could not read the code at {factory}: {e}.") from None
    if node_chain != network.chain_id:
        raise SetupError(f"The node of network {network_id} serves chain id {node_chain}, not"
                         f" {network.chain_id}.")
    version = None
    if isinstance(code, str) and code.startswith("0x"):
        try:
            version = forwarder.factory_version(bytes.fromhex(code[2:]))
        except ValueError:
            pass
    if version is None:
        raise SetupError(f"The code at {factory} on network {network_id} is not this service's"
                         " forwarder factory (networks deploy-factory deploys one).")
    _store_factory(db, network_id, factory, None, now, version)
    return factory


def deploy_factory(db, network_id, key_file, now, client_factory=rpc.Client):
    """Deploy the factory from the key file's account (which pays the gas) and set it:
    (factory address, tx hash, gas used)."""
    account = read_key_file(key_file)  # SignerError
    network = _network(db.connection(), network_id)
    _check_replaceable(db.connection(), network_id, None)  # before spending gas on it
    sender = Sender(client_factory(network.rpc_url), network.chain_id, account,
                    max_fee_per_gas=network.max_fee_per_gas)
    code = forwarder.factory_creation_code()
    try:
        sender.check_chain()
        fees = sender.fees()
        gas = int(sender.estimate(None, code) * GAS_MARGIN)
        cost = gas * fees.max_fee_per_gas
        balance = sender.balance()
        if balance < cost:
            raise ChainError(f"The key's account {sender.address} holds {balance} wei; deploying"
                             f" the factory may cost up to {cost} wei ({gas} gas): fund it first.")
        signed = sender.sign(to=None, data=code, gas_limit=gas, fees=fees, nonce=sender.nonce())
        sender.broadcast(signed.raw)
        receipt = sender.wait(signed.tx_hash)
    except rpc.RpcError as e:
        raise ChainError(f"The node did not answer as expected: {e}") from None
    if receipt is None:
        raise ChainError(f"The deployment {signed.tx_hash} was sent but not mined in time: run"
                         f" `networks set-factory {network_id} ADDRESS` once it is.")
    if receipt.status != 1 or not receipt.contract_address:
        raise ChainError(f"The deployment {signed.tx_hash} failed (reverted).")
    factory = addresses.to_checksum_address(receipt.contract_address)
    _store_factory(db, network_id, factory, signed.tx_hash, now, forwarder.VERSION)
    return factory, signed.tx_hash, receipt.gas_used


def _store_factory(db, network_id, factory, tx_hash, now, version):
    """Record the network's factory and its version. Replacing one is refused while payout-mode
    deposit addresses made with it exist: they can only ever be collected through it."""
    with db.transaction() as conn:
        _check_replaceable(conn, network_id, factory)
        payout_rows.set_factory(conn, network_id, factory, tx_hash, now, version)


def _check_replaceable(conn, network_id, factory):
    current = payout_rows.get_factory(conn, network_id)
    if (current is not None and current != factory
            and payout_rows.deposits(conn, network_id, current)):
        raise SetupError(f"Network {network_id} already has the factory {current}, and deposit"
                         " addresses made with it: they are collected through it only, so it"
                         " stays.")


def factories(db) -> dict[str, str]:
    conn = db.connection()
    return {n: payout_rows.get_factory(conn, n) for n in payout_rows.networks_with_factory(conn)}


def factory(db, network_id) -> str | None:
    return payout_rows.get_factory(db.connection(), network_id)


def networks_with_factory(db) -> set[str]:
    return payout_rows.networks_with_factory(db.connection())


def payout_of(db, merchant_id) -> str | None:
    """The merchant's payout address (the payout mode), or None."""
    return payout_rows.get_payout(db.connection(), merchant_id)


def collections_of(db, merchant_id) -> list[tuple]:
    """The collections of the merchant's addresses, newest first, each with its items (every
    merchant's: the caller keeps its own): [(Collection, [Item])]."""
    conn = db.connection()
    rows = payout_rows.of_merchant(conn, merchant_id)
    items = payout_rows.items_of(conn, [c.id for c in rows])
    return [(c, items.get(c.id, ())) for c in rows]
