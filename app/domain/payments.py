"""The Button API's side of live payments: what a customer may pay with, and confirming a customer's
choice (which gives the process its deposit address: a child of the merchant's xpub, or in the
payout mode the CREATE2 address of the network's forwarder factory for the merchant's payout
address; app/domain/payouts.py sets those up). The networks and assets it offers are the operator's
(setup.py). The chain watcher (app/chain/watcher/) takes it from there.

Decisions are in docs/payments.md ("Addresses and the API").
"""
from dataclasses import replace

from app.core.money import AmountError, format_units, to_base_units
from app.core.records import Asset, Network, Payment
from app.core.testnets import is_test_network
from app.data import merchants as merchant_rows
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data import processes as process_rows
from app.domain import health, rates
from app.domain.processes import InvalidState, ProcessNotFound
from app.domain.setup import network_health
from app.evm import addresses, forwarder

# An address index is skipped when its address is already some payment's (another merchant
# registered the same xpub before it was refused, a replaced xpub given back): at most this many.
MAX_SKIPPED_INDEXES = 1000


class NetworkUnavailable(Exception):
    """The chosen network's node is down or stalled (app/domain/health.py): 503, try later."""

    def __init__(self, network_id):
        super().__init__(f"Network {network_id!r} is unavailable for now (its node is down or"
                         " stalled): try again later, or choose another network.")
        self.network_id = network_id


class PaymentMethodUnavailable(Exception):
    """The merchant cannot take live payments; str() says why (never quoting the xpub)."""

    def __init__(self, message="This merchant cannot take live payments yet: no payout address"
                               " or wallet (xpub) is registered."):
        super().__init__(message)


class ChoiceError(ValueError):
    """The customer's choice cannot be paid with; `errors` maps fields to messages."""

    def __init__(self, errors):
        super().__init__(" ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


class ChoiceLocked(InvalidState):
    """A transfer to the address was seen: the asset and network can no longer change."""

    def __init__(self, process_id):
        super().__init__(process_id, "pending", "changed")
        # Its own message: the process is pending, what is locked is its choice.
        self.args = ((f"A payment to process {process_id}'s address has already been seen on"
                      " chain: its asset and network can no longer change."),)


def payable_assets(db, merchant, now, stale_seconds, process=None) -> list[dict]:
    """What the customer may pay with: every enabled asset on every enabled network of the
    merchant's mode (test networks for test mode, live networks for live mode) that is not
    unavailable (app/domain/health.py), grouped by asset id; for a payout-mode merchant, on the
    networks with a forwarder factory only; nothing for a merchant with neither a payout address
    nor an xpub (it cannot take live payments). For a `process`, only what can be quoted now, each
    network with the `amountDue` the customer would pay on it (the locked one for its choice)."""
    conn = db.connection()
    states = network_health(db, now, stale_seconds)
    down = {n.id for n, state in states if not state.ok}
    finalities = {n.id: n.finality for n, _ in states}
    if payout_rows.get_payout(conn, merchant.id) is not None:
        usable = payout_rows.networks_with_factory(conn).__contains__
    elif payment_rows.get_wallet(conn, merchant.id) is not None:
        usable = lambda network_id: True  # noqa: E731
    else:
        return []
    chosen = process and payment_rows.get_payment(conn, process.id)
    rates_now = process and rates.rates_for(conn, process.livemode)  # once for every asset
    grouped: dict[str, dict] = {}
    for asset, network_name, chain_id, confirmations, testnet in payment_rows.payable_assets(conn):
        if (is_test_network(chain_id, testnet) == merchant.livemode or not usable(asset.network_id)
                or asset.network_id in down):
            continue
        due = None
        if process is not None:
            if chosen and (chosen.asset_id, chosen.network_id) == (asset.id, asset.network_id):
                due = chosen.amount_due
            else:
                try:
                    due = _quote(conn, process, asset, now, rates_now).amount_due
                except (rates.RateUnavailable, ChoiceError):
                    continue
        entry = grouped.setdefault(
            asset.id, {"id": asset.id, "symbol": asset.symbol, "name": asset.name, "networks": []}
        )
        network = {"id": asset.network_id, "name": network_name, "chainId": chain_id,
                   "confirmations": confirmations, "finality": finalities[asset.network_id]}
        if due is not None:
            network["amountDue"] = format_units(due, asset.decimals)
        if asset.eip3009:  # payable without gas when a relayer serves it (app/chain/relayer.py)
            network["eip712Domain"] = {"name": asset.eip3009_name, "version": asset.eip3009_version,
                                       "chainId": chain_id, "verifyingContract": asset.contract}
        entry["networks"].append(network)
    return list(grouped.values())


def view(db, process):
    return payment_rows.view_of(db.connection(), process.id)


def views(db, processes):
    return views_of(db, [p.id for p in processes])


def views_of(db, process_ids):
    return payment_rows.views_of(db.connection(), process_ids)


def partly_paid(views) -> list[str]:
    """Of these {process id: PaymentView}, the processes whose confirmed money is above zero and
    below what is due (exactly)."""
    found = []
    for process_id, view in views.items():
        if 0 < view.paid < view.payment.amount_due:
            found.append(process_id)
    return found


def confirm(db, merchant, process_id, *, asset_id, network_id, now, stale_seconds=60):
    """The customer's choice of asset and network for a pending process: (process, PaymentView).

    The first confirm gives the process its deposit address: in the payout mode (a merchant with a
    payout address, even one that also has an xpub) the CREATE2 address of the chosen network's
    factory for the payout address and the process, else the next address of the merchant's
    wallet. Later ones keep it and may change the choice until a transfer to it is recorded (in
    the payout mode, to a network whose factory is the same contract address: the deposit address
    is that factory's). All in one write transaction
    (BEGIN IMMEDIATE), so concurrent confirms, from any number of processes, queue: the index read
    and its guarded increment cannot interleave."""
    now = int(now)
    with db.transaction() as conn:
        process = _pending_process(conn, merchant, process_id, now)
        existing = payment_rows.get_payment(conn, process_id)
        payout = payout_rows.get_payout(conn, merchant.id)
        wallet = payment_rows.get_wallet(conn, merchant.id)
        if existing is None and payout is None and wallet is None:
            raise PaymentMethodUnavailable()
        asset, network = _payable(conn, merchant, asset_id, network_id)
        if not health.of(network, now, stale_seconds).ok:
            raise NetworkUnavailable(network.id)
        payout_mode = existing.mode == "payout" if existing is not None else payout is not None
        factory, version = _factory(conn, network, existing) if payout_mode else (None, None)
        choice = dict(asset_id=asset.id, network_id=network.id, chain_id=network.chain_id,
                      token_contract=asset.contract, decimals=asset.decimals)
        same = existing is not None and all(getattr(existing, k) == v for k, v in choice.items())
        if not same:  # the same choice keeps its locked quote; another is quoted now
            quoted = _quote(conn, process, asset, now)
            choice.update(amount_due=quoted.amount_due, quote=quoted.text)
        # The merchant's tolerance when the payment is made: a later change leaves it as it was.
        tolerance = merchant_rows.get_tolerance(conn, merchant.id) or "0"
        if existing is not None:
            if not same:
                changed = replace(existing, **choice, updated_at=now)
                if not payment_rows.change_choice(conn, changed):
                    raise ChoiceLocked(process_id)
        elif payout_mode:
            address = forwarder.deposit_address(factory, payout, forwarder.salt(process_id),
                                                version)
            if payment_rows.address_taken(conn, address):  # a salt is the process's: never
                raise PaymentMethodUnavailable("This payment's deposit address is already taken.")
            payment_rows.insert_payment(conn, Payment(
                process_id=process_id, merchant_id=merchant.id, address_index=None,
                address=address, **choice, created_at=now, updated_at=now, mode="payout",
                payout_address=payout, factory=factory, tolerance=tolerance,
            ))
        else:
            index, address = _allocate(conn, merchant.id, wallet.xpub)
            payment_rows.insert_payment(conn, Payment(
                process_id=process_id, merchant_id=merchant.id, address_index=index,
                address=address, **choice, created_at=now, updated_at=now, tolerance=tolerance,
            ))
        return process, payment_rows.view_of(conn, process_id)


def _pending_process(conn, merchant, process_id, now):
    """`pending_process`, locked for the transaction: a second confirm of it waits."""
    process_rows.lock(conn, process_id)
    return pending_process(conn, merchant, process_id, now)


def pending_process(conn, merchant, process_id, now):
    """The merchant's process while it can still be paid: ProcessNotFound, InvalidState
    otherwise."""
    process = process_rows.get_for_merchant(conn, merchant.id, process_id)
    if process is None:
        raise ProcessNotFound(process_id)
    status = process.effective_status(now)
    if status != "pending" or now >= process.expires_at:
        raise InvalidState(process_id, "expired" if status == "pending" else status, "paid")
    return process


def _factory(conn, network, existing):
    """(address, version) of the network's forwarder factory, for a payout-mode payment: one the
    network offers, and the one an existing payment's address was made with."""
    factory, version = payout_rows.factory_of(conn, network.id) or (None, None)
    if factory is None:
        raise PaymentMethodUnavailable(
            f"This merchant's payments are collected by a forwarder contract, which network"
            f" {network.id} does not offer yet: choose another network.")
    if existing is not None and existing.mode == "payout" and (factory, version) != \
            payout_rows.factory_of(conn, existing.network_id):
        raise PaymentMethodUnavailable(
            f"This payment's address was made with another network's forwarder factory, which"
            f" is not at the same address on network {network.id}: choose another network.")
    return factory, version


def _quote(conn, process, asset, now, rates_now=None) -> rates.Quote:
    """The process's amount in the asset's base units, quoted now (rates.RateUnavailable when it
    cannot be). At par it is exact, as it always was: ChoiceError when the token's decimals cannot
    hold it; at a rate it is rounded up."""
    if process.currency == asset.peg:
        try:
            to_base_units(process.amount, asset.decimals)
        except AmountError:
            raise ChoiceError({"assetId": [
                f"The amount {process.amount} cannot be paid in {asset.symbol}: the token has"
                f" {asset.decimals} decimal places. Choose another asset."
            ]}) from None
    if rates_now is None:
        rates_now = rates.rates_for(conn, process.livemode)
    return rates.quote(process, asset, rates_now, now)


def _payable(conn, merchant, asset_id, network_id) -> tuple[Asset, Network]:
    """The enabled asset and network of the merchant's mode the customer chose, or ChoiceError
    naming the field."""
    errors = {}
    network = payment_rows.get_network(conn, network_id)
    if network is None or network.disabled_at is not None:
        errors["networkId"] = [f"No enabled network {network_id!r}: see GET"
                               " /payment-button/assets."]
    elif network.is_test == merchant.livemode:
        mode, other = ("live", "a test") if merchant.livemode else ("test", "a live")
        errors["networkId"] = [f"Network {network_id!r} is {other} network: {mode}-mode payments"
                               " cannot use it (see GET /payment-button/assets)."]
    else:
        asset = payment_rows.get_asset(conn, asset_id, network_id)
        if asset is None or asset.disabled_at is not None:
            errors["assetId"] = [
                f"No enabled asset {asset_id!r} on network {network_id!r}: see GET"
                " /payment-button/assets."
            ]
    if errors:
        raise ChoiceError(errors)
    return asset, network


def _allocate(conn, merchant_id, xpub) -> tuple[int, str]:
    """The next unused index of the merchant's wallet and its address; the index is consumed."""
    for _ in range(MAX_SKIPPED_INDEXES):
        index = payment_rows.get_wallet(conn, merchant_id).next_index
        if index > addresses.MAX_INDEX:
            raise PaymentMethodUnavailable(
                "This merchant cannot take live payments: every deposit address of its wallet"
                " has been given out.")
        if not payment_rows.take_index(conn, merchant_id, index):
            continue  # moved under us: read it again
        address = addresses.deposit_address(xpub, index)
        if not payment_rows.address_taken(conn, address):
            return index, address
    raise PaymentMethodUnavailable(
        f"This merchant cannot take live payments now: the next {MAX_SKIPPED_INDEXES} deposit"
        " addresses of its wallet already belong to other payments.")
