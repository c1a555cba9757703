"""Payments without gas: the relayer checks a payer's signed ERC-3009 authorization and submits it,
paying the gas from the operator's key (RELAYER_KEY_FILE). docs/contract.md, "Paying from the
browser wallet, with or without gas" and "A relayer nobody can drain or switch off for others";
docs/payments.md, "Payments without gas".

The web request broadcasts, not the chain watcher: the payer waits for a transaction hash, the
checks already ask the node (authorizationState, the payer's balance, a simulation of the very
call), and the watcher stays a reader that holds no key. Every call to the node made for one web
request shares one deadline (REQUEST_NODE_DEADLINE_SECONDS, `rpc.Client(deadline=…)`): past it
nothing more is asked or sent and the request answers 503 naming the network; a web worker never
waits on a node without end. No error shown to a caller quotes the node: its answer goes to the log.

Order: the client (`admit`: past its refused authorizations, 429 without the node), the process and
the fields (no node), the relayer's own state (key; the payer charged for a revert, the revert cap
for payers new to it, the hourly cap, the payer's hourly limit), the node's word (chain id and head;
what the network's recent relays came to, `_settle_recent`; the process's authorization in flight;
nonce unused, the payer's balance less what its authorizations in flight will take, the call
simulated on the pending state, the relayer's gas and the network's fees), then the relayer's turn
(one row `sending` at a time, in the database: several workers share one nonce sequence; the limits
and the payer's reservation checked again in it), the call simulated once more on the pending state
with the node's pending nonce (one batch), signing (app/evm/signer.py) and broadcast. Nothing is
broadcast before every check passed, and nothing that would revert. The key signs nothing but
transferWithAuthorization of the payment's registered asset to the payment's deposit address.

An authorization sent stays in flight until it can no longer move funds, on one block's word
(`_outcome`): a node that does not know its transaction is never enough (it is broadcast again).
One whose authorization is used counts as paid until the chain watcher has recorded its transfer.
One whose transaction reverted while its authorization stayed unused (its payer moved the money
between the check and the block) is charged to its payer: refused for CHARGE_SECONDS; it counts
against RELAYER_MAX_REVERTS_PER_HOUR, past which payers new to the relayer are refused, and not
against RELAYER_MAX_PER_HOUR, which counts relays that paid or may still pay.
"""
import logging
import time

from app.data import payments as payment_rows
from app.data import relays as relay_rows
from app.domain.payments import ChoiceError, PaymentMethodUnavailable, pending_process
from app.domain.processes import InvalidState
from app.evm import canonical, eip3009, rpc, signer

log = logging.getLogger(__name__)

MIN_VALIDITY_SECONDS = 60  # validBefore at least this far ahead: time to be mined
PAST_EXPIRY_SECONDS = 600  # ... and at most this long after the process's expiry
CLOCK_SKEW_SECONDS = 60  # a relay's validBefore this long past: no new block can take it
# how long a request waits for another relay's turn to end (within its deadline)
TURN_WAIT_SECONDS = 5
GAS_CHECK_SECONDS = 30  # how long the listing trusts a reading of the relayer's gas
GAS_RESERVE = 100_000  # gas units the listing wants the relayer to afford (one call: about 83k)
RETRY_AFTER = "5"
HOUR = 3600
CHARGE_SECONDS = 24 * 3600  # a payer whose relay reverted is refused this long
SETTLE_MAX = 100  # a network's relays of unknown outcome one request asks about, at most
# Refused authorizations (400, 409) per client address: within REFUSAL_WINDOW_SECONDS, this many
# for one process, or in all, and the client's further authorizations (for that process, or any)
# answer 429 without the node until the window moves on. What is kept: at most RELAY_REFUSALS_MAX
# rows (older ones pruned as new ones are written).
REFUSAL_WINDOW_SECONDS = 600
REFUSALS_PER_PROCESS = 6
REFUSALS_PER_CLIENT = 31
RELAY_REFUSALS_MAX = 20_000


class RelayUnavailable(Exception):
    """Nothing was sent: the node cannot be asked (in time), or the relayer is busy (503
    network_unavailable, Retry-After RETRY_AFTER seconds). The message names the network, never
    the node's answer, host or URL."""

    def __init__(self, message, network_id=None):
        super().__init__(message)
        self.network_id = network_id


class TooManyRefusals(Exception):
    """429 rate_limited: the client's refused authorizations reached a limit; Retry-After
    `retry_after` seconds (when the oldest one counted leaves the window)."""

    def __init__(self, message, retry_after):
        super().__init__(message)
        self.retry_after = retry_after


class AuthorizationError(ChoiceError):
    """A field of the authorization is wrong: 400 validation_error naming it."""


class _CapReached(PaymentMethodUnavailable):
    """The hourly cap or the payer's hourly limit, counting relays of unknown outcome as in flight:
    what the network's relays came to may lift it (`_settle_recent`)."""


def _unavailable(reason, kind=PaymentMethodUnavailable):
    return kind(f"Paying without gas is not available now: {reason}.")


def _network_down(network, e):
    """503 naming the network; the node's answer (its URL redacted: rpc's errors carry its scheme,
    host and port only) goes to the log."""
    log.warning("relayer: network %s: nothing sent: %s", network.id, e)
    return RelayUnavailable(f"The node of network {network.id} ({network.name}) cannot be asked"
                            " now; nothing was sent. Try again shortly.", network.id)


def request_deadline(config) -> float:
    """The deadline of a web request's node calls, from now (REQUEST_NODE_DEADLINE_SECONDS)."""
    return rpc.deadline_in(config["REQUEST_NODE_DEADLINE_SECONDS"])


# --- Refused authorizations, per client address -------------------------------------------------

def admit(db, client, process_id, now) -> int:
    """Count an authorization from `client` for `process_id` before anything is checked: the row
    reserved (a refusal unless `settle_refusal` says otherwise), or TooManyRefusals when the
    client's refusals within the window reached a limit (no node asked, nothing written). Requests
    of one client at once are counted one after the other (relays.hold_client), on any worker."""
    now = int(now)
    since = now - REFUSAL_WINDOW_SECONDS
    with db.transaction() as conn:
        relay_rows.hold_client(conn, client)
        relay_rows.prune_refusals(conn, since, RELAY_REFUSALS_MAX)
        total, first, for_process, first_for_process = relay_rows.refusals_since(
            conn, client, process_id, since)
        if total >= REFUSALS_PER_CLIENT:
            raise TooManyRefusals(
                f"Too many refused authorizations from this address ({total} within"
                f" {REFUSAL_WINDOW_SECONDS // 60} minutes): try again later, or pay with gas from"
                " the wallet.", max(1, first + REFUSAL_WINDOW_SECONDS - now))
        if for_process >= REFUSALS_PER_PROCESS:
            raise TooManyRefusals(
                f"Too many refused authorizations of process {process_id} from this address"
                f" ({for_process} within {REFUSAL_WINDOW_SECONDS // 60} minutes): try again later,"
                " or pay with gas from the wallet.",
                max(1, first_for_process + REFUSAL_WINDOW_SECONDS - now))
        return relay_rows.insert_refusal(conn, client, process_id, now)


def settle_refusal(db, reservation, refused: bool):
    """The answer is known: a refusal (400, 409) stays counted; anything else is forgotten."""
    if not refused:
        with db.transaction() as conn:
            relay_rows.delete_refusal(conn, reservation)


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

def available(db, config, network, now, readings: dict, deadline=None) -> bool:
    """Whether payments on `network` can go without gas now: a relayer is set, it is below its
    hourly cap, it holds gas for a few calls, and the gas price is within the operator's ceiling
    (asked at most every GAS_CHECK_SECONDS per worker, with short timeouts and within `deadline`,
    the listing's one deadline over its node calls: a slow node hides the option rather than the
    button). `readings`: the worker's cache, {(network id, relayer address): (time.monotonic(),
    usable)}; a network not asked at all (the deadline spent on others) is not cached."""
    account = relayer_account(config)
    if account is None or _cap_reached(db.connection(), config, now):
        return False
    key = (network.id, account.address)
    checked = readings.get(key)
    if checked is None or time.monotonic() - checked[0] > GAS_CHECK_SECONDS:
        client = rpc.Client(network.rpc_url,
                            timeout=(min(2.0, config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]),
                                     min(3.0, config["CHAIN_RPC_READ_TIMEOUT_SECONDS"])),
                            deadline=request_deadline(config) if deadline is None else deadline)
        try:
            chain_id, balance, price = client.batch([
                ("eth_chainId", []), ("eth_getBalance", [account.address, "latest"]),
                ("eth_gasPrice", [])])
            price = rpc.quantity(price, "eth_gasPrice")
            enough = (rpc.quantity(chain_id, "eth_chainId") == network.chain_id
                      and rpc.quantity(balance, "eth_getBalance") >= 2 * GAS_RESERVE * price
                      and (network.max_fee_per_gas is None or price <= network.max_fee_per_gas))
        except rpc.DeadlinePassed as e:
            log.info("relayer: network %s: gas not read: %s", network.id, e)
            if not e.asked:
                return False
            enough = False
        except rpc.RpcError as e:
            log.info("relayer: network %s: gas not read: %s", network.id, e)
            enough = False
        finally:
            client.session.close()
        checked = readings[key] = (time.monotonic(), enough)
    return checked[1]


def _cap_reached(conn, config, now) -> bool:
    return relay_rows.sent_since(conn, now - HOUR) >= config["RELAYER_MAX_PER_HOUR"]


def _check_limits(conn, config, from_address, now):
    """`_check_payer`, then `_check_caps`."""
    _check_payer(conn, config, from_address, now)
    _check_caps(conn, config, from_address, now)


def _check_payer(conn, config, from_address, now):
    """409 payment_method_unavailable for a payer whose relay reverted within CHARGE_SECONDS (it
    moved the money between the check and the block: the gas is charged to it so), and, once
    RELAYER_MAX_REVERTS_PER_HOUR relays reverted within the hour, for a payer new to the relayer
    (no relay of its paid): fresh addresses cannot make it spend gas on reverts without end, and
    payers it knows go on."""
    if relay_rows.last_revert_of(conn, from_address, now - CHARGE_SECONDS) is not None:
        raise _unavailable(f"a payment of {from_address} sent without gas failed on chain (the"
                           " tokens left the address before it was mined); pay with gas from the"
                           " wallet")
    limit = config["RELAYER_MAX_REVERTS_PER_HOUR"]
    if (relay_rows.reverted_since(conn, now - HOUR) >= limit
            and not relay_rows.has_paid(conn, from_address)):
        log.warning("relayer: RELAYER_MAX_REVERTS_PER_HOUR (%d) reached: new payers refused", limit)
        raise _unavailable("the relayer takes no new payers for now; pay with gas from the wallet")


def _check_caps(conn, config, from_address, now):
    """409 payment_method_unavailable at the hourly cap, or at the payer's own hourly limit (one
    payer cannot fill the cap that every payer shares): relays that paid or may still pay."""
    if _cap_reached(conn, config, now):
        log.warning("relayer: RELAYER_MAX_PER_HOUR (%d) reached", config["RELAYER_MAX_PER_HOUR"])
        raise _unavailable("the relayer has sent as many transactions as it may this hour",
                           _CapReached)
    if (relay_rows.sent_since(conn, now - HOUR, from_address)
            >= config["RELAYER_MAX_PER_PAYER_PER_HOUR"]):
        raise _unavailable(f"{from_address} has had as many payments sent without gas as it may"
                           " this hour; pay with gas from the wallet", _CapReached)


# --- POST /payment-button/process/<processId>/authorization ----------------------------------

def submit(db, config, merchant, process_id, fields: dict, now, deadline=None) -> str:
    """Check the authorization (docs/contract.md's list), submit it, and return the transaction's
    hash. `deadline`: the request's, over every node call (None: REQUEST_NODE_DEADLINE_SECONDS
    from now)."""
    account = relayer_account(config)
    process, view, asset, network = _payment(db, merchant, process_id, now)
    if not asset.eip3009 or account is None:
        raise _unavailable("this payment's token cannot be paid without gas here"
                           if account else "the service has no relayer")
    authorization = _authorization(fields)
    domain = eip3009.Domain(asset.eip3009_name, asset.eip3009_version, network.chain_id,
                            asset.contract)
    _check_fields(process, view, domain, authorization, now)
    conn = db.connection()
    _check_payer(conn, config, authorization.from_address, now)
    try:
        _check_caps(conn, config, authorization.from_address, now)
        capped = False
    except _CapReached:  # relays of unknown outcome counted: what they came to may lift it
        if not relay_rows.unsettled(conn, network.id, now - HOUR, 1):
            raise
        capped = True
    client = rpc.Client.from_config(
        network.rpc_url, config,
        deadline=request_deadline(config) if deadline is None else deadline)
    try:
        sender = signer.Sender(client, network.chain_id, account,
                               max_fee_per_gas=network.max_fee_per_gas)
        head = _head(sender, network)
        _settle_recent(db, sender, network.id, head, now)
        if capped:
            _check_limits(db.connection(), config, authorization.from_address, now)
        _no_other_in_flight(db, sender, process_id, head, now)
        call = eip3009.calldata(authorization)
        gas_limit, fees, funds = _check_on_chain(db, sender, asset.contract, authorization, call,
                                                 head, now)
        return _send(db, config, sender, view, authorization, (call, gas_limit, fees), funds, now,
                     network)
    except signer.FeesTooHigh as e:
        log.warning("relayer: %s", e)
        raise _unavailable("the network's fees are above what the operator allows now") from None
    except rpc.RpcError as e:
        raise _network_down(network, e) from None
    finally:
        client.session.close()


def _head(sender, network) -> str:
    """The node's head block (hex), in one batch with its chain id, which must be the network's."""
    chain_id, head = sender.client.batch([("eth_chainId", []), ("eth_blockNumber", [])])
    if rpc.quantity(chain_id, "eth_chainId") != network.chain_id:
        raise rpc.wrong_chain(sender.client.url, rpc.quantity(chain_id, "eth_chainId"),
                              network.chain_id)
    return hex(rpc.quantity(head, "eth_blockNumber"))


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
    """What needs no node: recipient, value (exactly what remains due), validity window,
    signature."""
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


def _no_other_in_flight(db, sender, process_id, head, now):
    """409 while another authorization of the process may still move funds, or has moved them and
    the chain watcher has not recorded the transfer yet (the remaining due does not show it)."""
    relay = relay_rows.open_for(db.connection(), process_id)
    if relay is None:
        return
    outcome = _settled(db, sender, relay, head, now)
    if outcome == "open":
        raise _in_flight(process_id)
    if outcome == "paid":
        raise _Conflict(f"An authorization of process {process_id} paid {relay.value} base units;"
                        " it counts once the chain watcher has recorded its transfer (in a few"
                        " seconds). Nothing more is due for it.")


def _settled(db, sender, relay, head, now) -> str:
    """`_outcome` of a relay at block `head` (a turn still `sending` is "open"), recorded: one that
    paid is marked so, one that reverted is charged to its payer; one that can take nothing more
    that the books do not show ("over", "reverted", or "paid" and recorded by the chain watcher) is
    marked final: "final"."""
    outcome = "open" if relay.state == "sending" else _outcome(sender, relay, head, now)
    if outcome == "paid" and relay.paid_at is None:
        with db.transaction() as conn:
            relay_rows.paid(conn, relay.id, now)
    if outcome == "reverted":
        _charge(db, relay, now)
        return "final"
    if outcome == "over" or (outcome == "paid"
                             and relay_rows.payment_recorded(db.connection(), relay)):
        with db.transaction() as conn:
            relay_rows.final(conn, relay.id, now)
        return "final"
    return outcome


def _charge(db, relay, now):
    """The relay reverted with its authorization unused: final, and charged to its payer."""
    with db.transaction() as conn:
        relay_rows.reverted(conn, relay.id, now)
    log.warning("relayer: %s of %s reverted (the tokens left the payer first): the payer is refused"
                " for %d hours", relay.tx_hash, relay.from_address, CHARGE_SECONDS // 3600)


def _outcome(sender, relay, head, now) -> str:
    """What a relay sent earlier is, on the node's word at block `head` (a node without that block
    errs rather than answer stale): "paid" (its authorization is used: the value is in the deposit
    address, by this relay or by whoever submitted the authorization first), "reverted" (its
    transaction mined and reverted, the authorization unused), "over" (it can no longer move funds:
    validBefore long past, or its transaction's nonce taken by another while the authorization
    stayed unused: replaced), else "open". An open one the node does not know is broadcast again (a
    node of a pool that never saw it, or lost it): one node's "unknown" frees nothing."""
    client = sender.client
    if eip3009.authorization_used(client, relay.token_contract, relay.from_address, relay.nonce,
                                  head):
        return "paid"
    if relay.relayer_nonce is not None and sender.mined_nonce(head) > relay.relayer_nonce:
        receipt = sender.receipt(relay.tx_hash) if relay.tx_hash else None
        return "reverted" if receipt is not None and receipt.status == 0 else "over"
    if now >= relay.valid_before + CLOCK_SKEW_SECONDS:
        return "over"
    if relay.raw_tx and not sender.known(relay.tx_hash):
        try:
            sender.broadcast(relay.raw_tx)
            log.info("relayer: %s, unknown to the node, broadcast again", relay.tx_hash)
        except rpc.RpcError as e:  # refused or unreachable: it stays in flight all the same
            log.warning("relayer: broadcasting %s again failed (%s)", relay.tx_hash, e)
    return "open"


def _settle_recent(db, sender, network_id, head, now):
    """What the network's recent relays of unknown outcome came to (at most SETTLE_MAX, of the last
    CHARGE_SECONDS), in one batch of receipts with the relayer's mined nonce, and one of
    authorizationState for those that did not pay: paid (marked so), reverted with the
    authorization unused (charged to the payer), or over (final); else left as they are. So the
    caps count what paid or may still pay, and a revert is charged even when neither its process
    nor its payer asks again (a payer moving its money away from fresh addresses). A receipt the
    node does not give frees nothing (another node may have the transaction): `_outcome` decides
    when the process or the payer asks."""
    relays = relay_rows.unsettled(db.connection(), network_id, now - CHARGE_SECONDS, SETTLE_MAX)
    if not relays:
        return
    client = sender.client
    answers = client.batch([("eth_getTransactionCount", [sender.address, head])]
                           + [("eth_getTransactionReceipt", [r.tx_hash]) for r in relays],
                           what="eth_getTransactionReceipt", tolerate=True)
    if isinstance(answers[0], rpc.RpcError):
        raise answers[0]
    mined = rpc.quantity(answers[0], "eth_getTransactionCount")
    paid, unused = [], []  # unused: (relay, reverted?) whose authorization is asked about
    for relay, answer in zip(relays, answers[1:], strict=True):
        try:
            receipt = None if isinstance(answer, rpc.RpcError) else canonical.receipt(answer,
                                                                                      relay.tx_hash)
        except rpc.RpcError:
            continue
        if receipt is not None and receipt.status == 1:
            paid.append(relay)
        elif receipt is not None:
            unused.append((relay, True))
        elif (now >= relay.valid_before + CLOCK_SKEW_SECONDS
              or relay.relayer_nonce is not None and mined > relay.relayer_nonce):
            unused.append((relay, False))
    states = client.batch([_state_call(r.token_contract, r.from_address, r.nonce, head)
                           for r, _ in unused], what="authorizationState",
                          tolerate=True) if unused else []
    for (relay, reverted), state in zip(unused, states, strict=True):
        try:
            if isinstance(state, rpc.RpcError):
                continue
            used = _used(state)
        except rpc.RpcError:
            continue
        if used:
            paid.append(relay)
        elif reverted:
            _charge(db, relay, now)
        else:
            with db.transaction() as conn:
                relay_rows.final(conn, relay.id, now)
    if paid:
        with db.transaction() as conn:
            for relay in paid:
                relay_rows.paid(conn, relay.id, now)


def _check_on_chain(db, sender, token, authorization, call, head, now):
    """The node's word at block `head`, in one batch: the nonce unused, the payer's funds
    (`_check_funds`: its balance less its relays in flight, those over marked final), the call
    simulated on the pending state (`_would_revert`), the relayer's gas; then the fees. (gas
    limit, fees, funds: what the turn checks again)."""
    client = sender.client
    payer = authorization.from_address
    used, balance, gas_coin, estimate = client.batch([
        _state_call(token, payer, authorization.nonce, head),
        ("eth_call", [{"to": token, "data": "0x" + eip3009.BALANCE_OF + _word(payer)}, head]),
        ("eth_getBalance", [sender.address, head]),
        ("eth_estimateGas", [{"from": sender.address, "to": token, "data": "0x" + call.hex()},
                             "pending"]),
    ], what="authorizationState", tolerate=True)
    for answer in (used, balance, gas_coin):
        if isinstance(answer, rpc.RpcError):
            raise answer
    if _used(used):
        raise AuthorizationError({"nonce": ["This authorization's nonce is already used."]})
    outcomes = [(r, _settled(db, sender, r, head, now))  # the payer's, on any process
                for r in relay_rows.open_from(db.connection(), token, payer)]
    in_flight = [r for r, outcome in outcomes if outcome != "final"]
    paid = frozenset(r.id for r, outcome in outcomes if outcome == "paid")
    funds = (rpc.word(balance, "balanceOf"), paid)
    _check_funds(in_flight, funds, authorization)
    if isinstance(estimate, rpc.RpcError):
        raise _would_revert(estimate)
    fees = sender.fees()
    gas_limit = int(rpc.quantity(estimate, "eth_estimateGas") * signer.GAS_MARGIN)
    if rpc.quantity(gas_coin, "eth_getBalance") < gas_limit * fees.max_fee_per_gas:
        log.error("relayer %s: not enough gas coin on chain %d to send a payment",
                  sender.address, sender.chain_id)
        raise _unavailable("the relayer has no gas left on this network")
    return gas_limit, fees, funds


def _word(address) -> str:
    return address[2:].lower().rjust(64, "0")


def _state_call(token, authorizer, nonce, block):
    """The token's authorizationState(authorizer, nonce) at `block`, as a call of a batch."""
    return ("eth_call", [{"to": token, "data": "0x" + eip3009.AUTHORIZATION_STATE
                          + _word(authorizer) + nonce[2:]}, block])


def _used(answer) -> bool:
    """An authorizationState answer: True once used (or cancelled)."""
    value = rpc.word(answer, "authorizationState")
    if value > 1:
        raise rpc.Malformed("authorizationState: not a bool")
    return value == 1


def _would_revert(error):
    """A simulation's error: the node's refusal of the call (it has a code: the call would revert)
    is 409 payment_method_unavailable, its text logged; anything else is the node's failure."""
    if error.code is None:
        return error
    log.info("relayer: the call would revert: %s", error)
    return _unavailable("the token would refuse this authorization now (simulated on the"
                        " network's pending state; the tokens may be leaving the address); nothing"
                        " was sent")


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
            f" once its authorizations in flight ({reserved} base units) are paid"
            if reserved else "")
        raise AuthorizationError({"from": [held + "."]})


def _send(db, config, sender, view, authorization, transaction, funds, now, network) -> str:
    """The relayer's turn: one row `sending`; in one batch the node's pending nonce and the call
    simulated once more on the pending state (what the node's pool will do before it: nothing that
    would revert is sent); sign, broadcast. `transaction`: (call data, gas limit, fees)."""
    call, gas_limit, fees = transaction
    payment = view.payment
    if authorization.to.lower() != payment.address.lower():  # never anything but a deposit
        raise RuntimeError("the relayer only pays deposit addresses")
    relay_id = _take_turn(db, config, payment, authorization, funds, now, sender.client.deadline,
                          network)
    try:
        nonce, simulated = sender.client.batch([
            ("eth_getTransactionCount", [sender.address, "pending"]),
            ("eth_call", [{"from": sender.address, "to": payment.token_contract,
                           "data": "0x" + call.hex(), "gas": hex(gas_limit)}, "pending"]),
        ], what="eth_getTransactionCount", tolerate=True)
        if isinstance(nonce, rpc.RpcError):
            raise nonce
        if isinstance(simulated, rpc.RpcError):
            raise _would_revert(simulated)
        signed = sender.sign(to=payment.token_contract, data=call, gas_limit=gas_limit, fees=fees,
                             nonce=rpc.quantity(nonce, "eth_getTransactionCount"))
        with db.transaction() as conn:
            relay_rows.signed(conn, relay_id, signed.tx_hash, signed.nonce, signed.raw)
    except BaseException:
        with db.transaction() as conn:
            relay_rows.dropped(conn, relay_id, now)
        raise
    try:
        sender.broadcast(signed.raw)
    except rpc.RpcError as e:
        gone = isinstance(e, rpc.DeadlinePassed) and not e.asked
        # the node refused it, or it was never sent: nothing went out
        if e.code is not None or gone:
            with db.transaction() as conn:
                relay_rows.dropped(conn, relay_id, now)
            raise
        log.warning("relayer: broadcast of %s unanswered (%s): it may be out", signed.tx_hash, e)
    with db.transaction() as conn:
        relay_rows.sent(conn, relay_id)
    log.info("relayer: process %s, authorization of %s sent in %s", payment.process_id,
             authorization.from_address, signed.tx_hash)
    return signed.tx_hash


def _take_turn(db, config, payment, authorization, funds, now, deadline, network) -> int:
    """Insert the row `sending`: the process's one in flight and the relayer's one turn, after the
    limits and the payer's funds checked again in the same transaction (another worker's relay from
    the same payer may have begun since); waits TURN_WAIT_SECONDS at most for another relay's turn,
    and never past the request's `deadline`."""
    stale = 2 * (config["CHAIN_RPC_CONNECT_TIMEOUT_SECONDS"]  # a turn is two calls to the node
                 + config["CHAIN_RPC_READ_TIMEOUT_SECONDS"]) + 10
    until = time.monotonic() + TURN_WAIT_SECONDS
    if deadline is not None:
        until = min(until, deadline)
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
        if time.monotonic() > until:
            raise RelayUnavailable(f"The relayer is busy on network {network.id}; nothing was"
                                   " sent. Try again shortly.", network.id)
        time.sleep(0.05)
