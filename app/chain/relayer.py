"""Payments without gas: the relayer checks a payer's signed ERC-3009 authorization and submits it,
paying the gas from the operator's key (RELAYER_KEY_FILE). the contract, "Paying from the browser wallet,
with or without gas"; docs/payments.md, "Payments without gas".

The web request broadcasts, not the chain watcher: the payer waits for a transaction hash, the
checks already ask the node (authorizationState, the payer's balance, a simulation of the very
call), and the watcher stays a reader that holds no key. Every call to the node is bounded by the
CHAIN_RPC_* timeouts, and once the checks have taken DEADLINE_SECONDS nothing is sent (503): a web
worker never waits on a node without end.

Order: the process and the fields (no node), the relayer's own state (key, hourly cap, the
payer's hourly limit), the node's word (chain id; the process's authorization in flight; nonce
unused, the payer's balance less what its authorizations in flight will take, the call simulated on
the pending state, the relayer's gas and the network's fees), then the relayer's turn (one row
`sending` at a time, in the database: several workers share one nonce sequence; the payer's
reservation checked again in it), signing (app/evm/signer.py) and broadcast. Nothing is broadcast
before every check passed. The key signs nothing but transferWithAuthorization of the payment's
registered asset to the payment's deposit address.

An authorization sent stays in flight until it can no longer move funds, on one block's word
(`_outcome`): a node that does not know its transaction is never enough (it is broadcast again).
One whose authorization is used counts as paid until the chain watcher has recorded its transfer.
"""
import logging
import time

from app.data import payments as payment_rows
from app.data import relays as relay_rows
from app.domain.payments import ChoiceError, PaymentMethodUnavailable, pending_process
from app.domain.processes import InvalidState
from app.evm import eip3009, rpc, signer

log = logging.getLogger(__name__)

MIN_VALIDITY_SECONDS = 60  # validBefore at least this far ahead: time to be mined
PAST_EXPIRY_SECONDS = 600  # ... and at most this long after the process's expiry
CLOCK_SKEW_SECONDS = 60  # a relay's validBefore this long past: no new block can take it
DEADLINE_SECONDS = 15  # the checks took longer: send nothing (a gunicorn worker's timeout is 30)
TURN_WAIT_SECONDS = 5  # how long a request waits for another relay's turn to end
GAS_CHECK_SECONDS = 30  # how long the listing trusts a reading of the relayer's gas
GAS_RESERVE = 100_000  # gas units the listing wants the relayer to afford (one call: about 83k)
RETRY_AFTER = "5"


class RelayUnavailable(Exception):
    """Nothing was sent: the node cannot be asked, or the relayer is busy (503 network_unavailable,
    Retry-After RETRY_AFTER seconds)."""


class AuthorizationError(ChoiceError):
    """A field of the authorization is wrong: 400 validation_error naming it."""


def _unavailable(reason):
    return PaymentMethodUnavailable(f"Paying without gas is not available now: {reason}.")


def _network_down(e):
    return RelayUnavailable(f"The network's node cannot be asked now ({e}); nothing was sent. Try"
                            " again shortly.")


def relayer_account(config):
    """The relayer's account from RELAYER_KEY_FILE, or None (unset, or unusable: logged)."""
    path = config.get("RELAYER_KEY_FILE")
    if not path:
        return None
    try:
        return signer.read_key_file(path)
    except signer.SignerError as e:  # names the file, never its content
        log.error("relayer: %s", e)
        return None


# --- Whether the option is offered (GET /payment-button/assets) ----------------------------------

def available(db, config, network, now, readings: dict) -> bool:
    """Whether payments on `network` can go without gas now: a relayer is set, it is below its
    hourly cap, it holds gas for a few calls, and the gas price is within the operator's ceiling
    (asked at most every GAS_CHECK_SECONDS per worker, with short timeouts: a slow node hides the
    option rather than the button). `readings`: the worker's cache, {(network id, relayer
    address): (time.monotonic(), usable)}."""
    account = relayer_account(config)
    if account is None or _cap_reached(db.connection(), config, now):
        return False
    key = (network.id, account.address)
    checked = readings.get(key)
    if checked is None or time.monotonic() - checked[0] > GAS_CHECK_SECONDS:
        client = rpc.Client(network.rpc_url, timeout=(min(2.0, config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]),
                                                      min(3.0, config["CHAIN_RPC_READ_TIMEOUT_SECONDS"])))
        try:
            chain_id, balance, price = client.batch([
                ("eth_chainId", []), ("eth_getBalance", [account.address, "latest"]),
                ("eth_gasPrice", [])])
            price = rpc.quantity(price, "eth_gasPrice")
            enough = (rpc.quantity(chain_id, "eth_chainId") == network.chain_id
                      and rpc.quantity(balance, "eth_getBalance") >= 2 * GAS_RESERVE * price
                      and (network.max_fee_per_gas is None or price <= network.max_fee_per_gas))
        except rpc.RpcError:
            enough = False
        finally:
            client.session.close()
        checked = readings[key] = (time.monotonic(), enough)
    return checked[1]


def _cap_reached(conn, config, now) -> bool:
    return relay_rows.sent_since(conn, now - 3600) >= config["RELAYER_MAX_PER_HOUR"]


def _check_limits(conn, config, from_address, now):
    """409 payment_method_unavailable at the hourly cap, or at the payer's own hourly limit (one
    payer cannot fill the cap that every payer shares)."""
    if _cap_reached(conn, config, now):
        log.warning("relayer: RELAYER_MAX_PER_HOUR (%d) reached", config["RELAYER_MAX_PER_HOUR"])
        raise _unavailable("the relayer has sent as many transactions as it may this hour")
    if relay_rows.sent_since(conn, now - 3600, from_address) >= config["RELAYER_MAX_PER_PAYER_PER_HOUR"]:
        raise _unavailable(f"{from_address} has had as many payments sent without gas as it may"
                           " this hour; pay with gas from the wallet")


# --- POST /payment-button/process/<processId>/authorization ----------------------------------

def submit(db, config, merchant, process_id, fields: dict, now) -> str:
    """Check the authorization (the contract's list), submit it, and return the transaction's hash."""
    started = time.monotonic()
    account = relayer_account(config)
    process, view, asset, network = _payment(db, merchant, process_id, now)
    if not asset.eip3009 or account is None:
        raise _unavailable("this payment's token cannot be paid without gas here"
                           if account else "the service has no relayer")
    authorization = _authorization(fields)
    domain = eip3009.Domain(asset.eip3009_name, asset.eip3009_version, network.chain_id,
                            asset.contract)
    _check_fields(process, view, domain, authorization, now)
    _check_limits(db.connection(), config, authorization.from_address, now)
    client = rpc.Client.from_config(network.rpc_url, config)
    try:
        sender = signer.Sender(client, network.chain_id, account,
                               max_fee_per_gas=network.max_fee_per_gas)
        try:
            sender.check_chain()
        except signer.ChainError as e:
            raise _network_down(e) from None
        _no_other_in_flight(db, sender, process_id, now)
        call = eip3009.calldata(authorization)
        gas_limit, fees, funds = _check_on_chain(db, sender, asset.contract, authorization, call,
                                                 now)
        if time.monotonic() - started > DEADLINE_SECONDS:
            raise _network_down("the node answers too slowly")
        return _send(db, config, sender, view, authorization, (call, gas_limit, fees), funds, now)
    except signer.FeesTooHigh as e:
        log.warning("relayer: %s", e)
        raise _unavailable("the network's fees are above what the operator allows now") from None
    except rpc.RpcError as e:
        raise _network_down(e) from None
    finally:
        client.session.close()


def _payment(db, merchant, process_id, now):
    """The pending, confirmed process and its payment, asset and network; else 404 or 409."""
    conn = db.connection()
    process = pending_process(conn, merchant, process_id, now)
    view = payment_rows.view_of(conn, process_id)
    if view is None:
        raise _Conflict(f"Process {process_id} has no asset and network chosen yet: confirm the"
                        " choice first.")
    payment = view.payment
    asset = payment_rows.get_asset(conn, payment.asset_id, payment.network_id)
    network = payment_rows.get_network(conn, payment.network_id)
    if asset is None or network is None or network.disabled_at is not None:
        raise _unavailable("the payment's network is no longer offered")
    if network.is_test == merchant.livemode:  # `networks set-mode` since: never credited there
        raise _unavailable(f"network {network.id} no longer takes"
                           f" {'live' if merchant.livemode else 'test'}-mode payments")
    return process, view, asset, network


class _Conflict(InvalidState):
    """409 invalid_state about a pending process, with its own message."""

    def __init__(self, message):
        ValueError.__init__(self, message)
        self.status = "pending"


def _in_flight(process_id):
    return _Conflict(f"Another authorization of process {process_id} is in flight: wait until it"
                     " is mined or expires.")


def _authorization(fields) -> eip3009.Authorization:
    return eip3009.Authorization(
        from_address=fields["from_"], to=fields["to"], value=fields["value"],
        valid_after=fields["validAfter"], valid_before=fields["validBefore"],
        nonce=fields["nonce"].lower(), signature=fields["signature"].lower())


def _check_fields(process, view, domain, authorization, now):
    """What needs no node: recipient, value (exactly what remains due), validity window, signature."""
    payment = view.payment
    paid = sum(t.amount for t in view.transfers)  # confirmed and seen, as the paymentUri asks
    remaining = payment.amount_due - paid
    if remaining <= 0:
        raise _Conflict(f"Process {process.id} has nothing left to pay: what was sent covers it.")
    errors = {}
    if authorization.to.lower() != payment.address.lower():
        errors["to"] = [f"Must be this payment's deposit address, {payment.address}."]
    if authorization.value != remaining:
        errors["value"] = [f"Must be exactly the remaining due, {remaining} base units."]
    if authorization.valid_after >= now:
        errors["validAfter"] = ["Must be in the past: the authorization must be valid now."]
    latest = process.expires_at + PAST_EXPIRY_SECONDS
    if not now + MIN_VALIDITY_SECONDS <= authorization.valid_before <= latest:
        errors["validBefore"] = [f"Must be at least {MIN_VALIDITY_SECONDS} s ahead and at most"
                                 f" {PAST_EXPIRY_SECONDS} s after the payment expires ({latest})."]
    if not errors and eip3009.recover(domain, authorization) != authorization.from_address:
        errors["signature"] = ["Does not recover `from` under the token's EIP-712 domain and the"
                               f" network's chain id {domain.chain_id}."]
    if errors:
        raise AuthorizationError(errors)


def _no_other_in_flight(db, sender, process_id, now):
    """409 while another authorization of the process may still move funds, or has moved them and
    the chain watcher has not recorded the transfer yet (the remaining due does not show it)."""
    relay = relay_rows.open_for(db.connection(), process_id)
    if relay is None:
        return
    outcome = _settled(db, sender, relay, hex(sender.client.block_number()), now)
    if outcome == "open":
        raise _in_flight(process_id)
    if outcome == "paid":
        raise _Conflict(f"An authorization of process {process_id} paid {relay.value} base units;"
                        " it counts once the chain watcher has recorded its transfer (in a few"
                        " seconds). Nothing more is due for it.")


def _settled(db, sender, relay, head, now) -> str:
    """`_outcome` of a relay at block `head` (a turn still `sending` is "open"); one that can take
    nothing more that the books do not show ("over", or "paid" and recorded by the chain watcher)
    is marked final: "final"."""
    outcome = "open" if relay.state == "sending" else _outcome(sender, relay, head, now)
    if outcome == "over" or (outcome == "paid"
                             and relay_rows.payment_recorded(db.connection(), relay)):
        with db.transaction() as conn:
            relay_rows.final(conn, relay.id, now)
        return "final"
    return outcome


def _outcome(sender, relay, head, now) -> str:
    """What a relay sent earlier is, on the node's word at block `head` (a node without that block
    errs rather than answer stale): "paid" (its authorization is used: the value is in the deposit
    address, by this relay or by whoever submitted the authorization first), "over" (it can no
    longer move funds: validBefore long past, or its transaction's nonce taken while the
    authorization stayed unused: reverted or replaced), else "open". An open one the node does not
    know is broadcast again (a node of a pool that never saw it, or lost it): one node's "unknown"
    frees nothing."""
    client = sender.client
    if eip3009.authorization_used(client, relay.token_contract, relay.from_address, relay.nonce,
                                  head):
        return "paid"
    if now >= relay.valid_before + CLOCK_SKEW_SECONDS:
        return "over"
    if relay.relayer_nonce is not None and sender.mined_nonce(head) > relay.relayer_nonce:
        return "over"
    if relay.raw_tx and not sender.known(relay.tx_hash):
        try:
            sender.broadcast(relay.raw_tx)
            log.info("relayer: %s, unknown to the node, broadcast again", relay.tx_hash)
        except rpc.RpcError as e:  # refused or unreachable: it stays in flight all the same
            log.warning("relayer: broadcasting %s again failed (%s)", relay.tx_hash, e)
    return "open"


def _check_on_chain(db, sender, token, authorization, call, now):
    """The node's word: the nonce unused, the payer's funds (`_check_funds`: its balance less its
    relays in flight, those over marked final), the call simulated on the pending state, the
    relayer's gas and the fees. (gas limit, fees, funds: what the turn checks again)."""
    client = sender.client
    head = hex(client.block_number())
    if eip3009.authorization_used(client, token, authorization.from_address, authorization.nonce,
                                  head):
        raise AuthorizationError({"nonce": ["This authorization's nonce is already used."]})
    outcomes = [(r, _settled(db, sender, r, head, now))  # the payer's, on any process
                for r in relay_rows.open_from(db.connection(), token, authorization.from_address)]
    in_flight = [r for r, outcome in outcomes if outcome != "final"]
    paid = frozenset(r.id for r, outcome in outcomes if outcome == "paid")
    funds = (eip3009.balance_of(client, token, authorization.from_address, head), paid)
    _check_funds(in_flight, funds, authorization)
    try:
        estimate = sender.estimate(token, call, "pending")
    except rpc.RpcError as e:
        if e.code is None:
            raise
        raise AuthorizationError({"signature": [f"The token refuses this authorization ({e})."]})
    fees = sender.fees()
    gas_limit = int(estimate * signer.GAS_MARGIN)
    if sender.balance() < gas_limit * fees.max_fee_per_gas:
        log.error("relayer %s: not enough gas coin on chain %d to send a payment",
                  sender.address, sender.chain_id)
        raise _unavailable("the relayer has no gas left on this network")
    return gas_limit, fees, funds


def _check_funds(in_flight, funds, authorization):
    """400 unless `from` holds `value` beyond what its authorizations in flight will still take
    (those not yet used at the block its balance was read at), and none of them has this nonce: a
    balance backs one payment, never several sent before the first is mined."""
    balance, paid = funds
    if any(r.nonce == authorization.nonce for r in in_flight):
        raise AuthorizationError({"nonce": ["An authorization with this nonce is already being"
                                            " sent."]})
    reserved = sum(r.value for r in in_flight if r.id not in paid)
    if balance - reserved < authorization.value:
        held = "Holds less than `value` of the token" + (
            f" once its authorizations in flight ({reserved} base units) are paid" if reserved else "")
        raise AuthorizationError({"from": [held + "."]})


def _send(db, config, sender, view, authorization, transaction, funds, now) -> str:
    """The relayer's turn: one row `sending`, the node's pending nonce, sign, broadcast.
    `transaction`: (call data, gas limit, fees)."""
    call, gas_limit, fees = transaction
    payment = view.payment
    if authorization.to.lower() != payment.address.lower():  # never anything but a deposit
        raise RuntimeError("the relayer only pays deposit addresses")
    relay_id = _take_turn(db, config, payment, authorization, funds, now)
    try:
        signed = sender.sign(to=payment.token_contract, data=call, gas_limit=gas_limit, fees=fees,
                             nonce=sender.nonce())
        with db.transaction() as conn:
            relay_rows.signed(conn, relay_id, signed.tx_hash, signed.nonce, signed.raw)
    except BaseException:
        with db.transaction() as conn:
            relay_rows.dropped(conn, relay_id, now)
        raise
    try:
        sender.broadcast(signed.raw)
    except rpc.RpcError as e:
        if e.code is not None:  # the node refused it: nothing went out
            with db.transaction() as conn:
                relay_rows.dropped(conn, relay_id, now)
            raise
        log.warning("relayer: broadcast of %s unanswered (%s): it may be out", signed.tx_hash, e)
    with db.transaction() as conn:
        relay_rows.sent(conn, relay_id)
    log.info("relayer: process %s, authorization of %s sent in %s", payment.process_id,
             authorization.from_address, signed.tx_hash)
    return signed.tx_hash


def _take_turn(db, config, payment, authorization, funds, now) -> int:
    """Insert the row `sending`: the process's one in flight and the relayer's one turn, after the
    limits and the payer's funds checked again in the same transaction (another worker's relay from
    the same payer may have begun since); waits TURN_WAIT_SECONDS at most for another relay's turn."""
    stale = 2 * (config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]  # a turn is two calls to the node
                 + config["CHAIN_RPC_READ_TIMEOUT_SECONDS"]) + 10
    deadline = time.monotonic() + TURN_WAIT_SECONDS
    while True:
        with db.transaction() as conn:
            relay_rows.release_stale(conn, now - stale, now)
            _check_limits(conn, config, authorization.from_address, now)
            _check_funds(relay_rows.open_from(conn, payment.token_contract,
                                              authorization.from_address), funds, authorization)
            relay_id = relay_rows.begin(
                conn, process_id=payment.process_id, network_id=payment.network_id,
                token_contract=payment.token_contract, from_address=authorization.from_address,
                value=authorization.value, valid_before=authorization.valid_before,
                nonce=authorization.nonce, now=now)
            in_flight = relay_id is None and relay_rows.open_for(conn, payment.process_id)
        if relay_id is not None:
            return relay_id
        if in_flight:
            raise _in_flight(payment.process_id)
        if time.monotonic() > deadline:
            raise RelayUnavailable("The relayer is busy; nothing was sent. Try again shortly.")
        time.sleep(0.05)
