"""The JSON the service shows: Process objects, pages of them, and webhook event bodies.

Each object is built as a dict and written by the one JSON writer (app.core.jsonutil.dumps_compact),
which escapes every string; the amount literal and the stored metadata go in as Fragments, byte for
byte as they came in (no float, no re-encoding). Key order follows docs/contract.md.
"""
from datetime import UTC, datetime
from functools import lru_cache

from app.core.jsonutil import Fragment, dumps_compact, loads
from app.core.money import format_units
from app.evm.addresses import to_checksum_address


@lru_cache(maxsize=4096)
def iso(ts: int) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def process_object(p, now, payment=None, refunds=()) -> dict:
    """The Process object; `payment` is its PaymentView (None: not confirmed, shown as null),
    `refunds` its Refunds, oldest first."""
    return {
        "processId": p.id, "status": p.effective_status(now), "amount": Fragment(p.amount),
        "currency": p.currency, "metadata": Fragment(p.metadata), "livemode": bool(p.livemode),
        "createdAt": iso(p.created_at), "updatedAt": iso(p.effective_updated_at(now)),
        "expiresAt": iso(p.expires_at), "description": p.description,
        "successUrl": p.success_url, "cancelUrl": p.cancel_url, "checkoutUrl": checkout_url(p),
        "payment": None if payment is None else payment_object(payment),
        "refunds": [refund_object(r) for r in refunds],
    }


def process_json(p, now, payment=None, refunds=()) -> str:
    return dumps_compact(process_object(p, now, payment, refunds))


def checkout_url(p) -> str | None:
    """The process's hosted checkout page (None: made before checkout pages)."""
    return None if p.checkout_base is None else f"{p.checkout_base}/checkout/{p.id}"


def public_process_json(p, now, payment=None, network_state=None) -> str:
    """What a browser may see: never the metadata (it can hold e-mails). `network_state`: the
    chosen network's health ("ok", "unavailable"; None before a choice), so the button can say
    that the network is delayed."""
    return dumps_compact({
        "processId": p.id, "status": p.effective_status(now), "amount": Fragment(p.amount),
        "currency": p.currency, "expiresAt": iso(p.expires_at), "livemode": bool(p.livemode),
        "networkState": network_state,
        "payment": None if payment is None else payment_object(payment, public=True),
    })


def page_json(processes, has_more, now, payments=None, refunds=None) -> str:
    """A page of Process objects; `payments` maps process ids to their PaymentView, `refunds` to
    their lists of Refunds."""
    payments, refunds = payments or {}, refunds or {}
    return dumps_compact({
        "data": [process_object(p, now, payments.get(p.id), refunds.get(p.id, ()))
                 for p in processes],
        "hasMore": bool(has_more)})


def payment_object(view, public=False) -> dict:
    """The `payment` object of docs/contract.md as a dict (the console's pages read it). Amounts are
    token units rendered from integer base units; a transfer's confirmations count its own block,
    from the network's head when last asked. `paymentUri` (EIP-681) asks for what is still
    outstanding: the amount due less what was paid or seen, 0 when nothing is (the button then shows
    progress, not a code). `public` (what a browser sees): who accepted an unexpected transfer is
    left out (null)."""
    p, d = view.payment, view.payment.decimals
    paid, pending, _ = _amounts(view)
    transfers = [{"txHash": t.tx_hash, "logIndex": t.log_index, "blockNumber": t.block_number,
                  "amount": format_units(t.amount, d),
                  "confirmations": max(0, _head(t, p) - t.block_number + 1)}
                 for t in view.transfers]
    return {"assetId": p.asset_id, "networkId": p.network_id, "chainId": p.chain_id,
            "tokenContract": p.token_contract, "address": p.address,
            "amountDue": format_units(p.amount_due, d), "amountPaid": format_units(paid, d),
            "amountPending": format_units(pending, d), "paymentUri": payment_uri(view),
            "transfers": transfers,
            "unexpectedTransfers": [unexpected_object(u, public) for u in view.unexpected],
            "finality": p.finality, "quote": quote_object(p)}


def quote_object(payment) -> dict:
    """The payment's locked quote (docs/contract.md, "Prices in the merchant's currency"); one made
    before quotes was at par, in USD, when the payment was made."""
    if payment.quote is not None:
        return loads(payment.quote.encode())
    return {"currency": "USD", "amount": format_units(payment.amount_due, payment.decimals),
            "rate": "1", "pair": None, "inverse": False, "source": "par", "networkId": None,
            "feed": None, "roundId": None, "rateUpdatedAt": None,
            "quotedAt": iso(payment.created_at)}


def _amounts(view):
    """(paid, pending, outstanding) of a payment in base units: confirmed, seen, and still asked
    for."""
    paid = view.paid
    pending = sum(t.amount for t in view.transfers if t.status == "seen")
    return paid, pending, max(view.payment.amount_due - paid - pending, 0)


def payment_uri(view) -> str:
    """The EIP-681 request a payment's `paymentUri` shows (and its QR code): what is outstanding."""
    p, outstanding = view.payment, _amounts(view)[2]
    return (f"ethereum:{p.token_contract}@{p.chain_id}/transfer"
            f"?address={p.address}&uint256={outstanding}")


def unexpected_object(u, public=False) -> dict:
    """An entry of `payment.unexpectedTransfers`: a confirmed transfer to the deposit address that
    is not the payment's choice. `symbol` and `amount` (token units) when the contract answered
    `symbol()` and `decimals()` (null otherwise); `baseUnits` always; `acceptedAt`/`acceptedBy`
    once staff accepted it as payment (it then counts in `amountPaid`); `acceptedBy` (a staff
    e-mail, a secret key's first characters) is null in what a browser sees (`public`)."""
    return {"networkId": u.network_id, "chainId": u.chain_id,
            "tokenContract": to_checksum_address(u.token_contract), "symbol": u.symbol,
            "amount": None if u.decimals is None else format_units(u.amount, u.decimals),
            "baseUnits": str(u.amount), "txHash": u.tx_hash, "logIndex": u.log_index,
            "blockNumber": u.block_number,
            "acceptedAt": None if u.accepted_at is None else iso(u.accepted_at),
            "acceptedBy": None if public else u.accepted_by}


def refund_payment_uri(r) -> str:
    """The EIP-681 request a refund's `paymentUri` shows: exactly the refund, to the customer."""
    return (f"ethereum:{r.token_contract}@{r.chain_id}/transfer"
            f"?address={r.address}&uint256={r.amount}")


def refund_object(r) -> dict:
    """The Refund object. `amount` is a decimal string in token units, like the payment's amounts;
    `paymentUri` (EIP-681) asks the merchant's wallet for exactly the refund; `txHash` is the
    transaction named for it or found paying it (null until then); `sender` the settling transfer's
    from address (null until completed); `namedBy` who named the transaction (a console user's
    e-mail or "secret key"; null when none is named); `clearedTxHash` and `clearedReason` the last
    name the watcher cleared, and why; `transfers` holds the confirmed transfer that settled it
    (empty until then)."""
    transfers = []
    if r.status == "completed":
        transfers.append({"txHash": r.tx_hash, "logIndex": r.log_index,
                          "blockNumber": r.block_number,
                          "amount": format_units(r.transfer_amount, r.decimals)})
    return {
        "refundId": r.id, "processId": r.process_id, "status": r.status,
        "amount": format_units(r.amount, r.decimals), "assetId": r.asset_id,
        "networkId": r.network_id, "tokenContract": r.token_contract, "address": r.address,
        "reason": r.reason, "paymentUri": refund_payment_uri(r), "txHash": r.shown_tx_hash,
        "sender": getattr(r, "sender", None), "namedBy": getattr(r, "named_by", None),
        "clearedTxHash": getattr(r, "cleared_tx_hash", None),
        "clearedReason": getattr(r, "cleared_reason", None),
        "createdAt": iso(r.created_at), "updatedAt": iso(r.updated_at), "transfers": transfers,
    }


def refund_json(r) -> str:
    return dumps_compact(refund_object(r))


def refund_list_json(refunds) -> str:
    return dumps_compact({"data": [refund_object(r) for r in refunds]})


def _head(transfer, payment) -> int:
    """The head its confirmations count from: its own network's (a transfer sent with an earlier
    choice may be on another network), else the payment's."""
    return payment.head_block if transfer.head_block is None else transfer.head_block


def event_json(event_type, timestamp, data) -> str:
    """An event's body; `data` the object it reports (a dict, or its JSON text as a Fragment)."""
    return dumps_compact({"type": event_type, "timestamp": iso(timestamp), "data": data})


def link_object(link, paid, base, now) -> dict:
    """The Link object (docs/contract.md, "Payment links"): `paid` its completed processes, `base`
    the service's public base URL; the amount and metadata go out as they came in."""
    return {
        "linkId": link.id, "url": f"{base}/l/{link.id}", "amount": Fragment(link.amount),
        "currency": link.currency, "description": link.description,
        "metadata": Fragment(link.metadata), "successUrl": link.success_url,
        "maxPayments": link.max_payments, "payments": paid,
        "active": link.why_unavailable(paid, now) is None,
        "expiresAt": None if link.expires_at is None else iso(link.expires_at),
        "createdAt": iso(link.created_at),
    }


def link_json(link, paid, base, now) -> str:
    return dumps_compact(link_object(link, paid, base, now))


def link_list_json(links, paid, has_more, base, now) -> str:
    return dumps_compact({"data": [link_object(link, paid.get(link.id, 0), base, now)
                                   for link in links], "hasMore": bool(has_more)})


def endpoint_object(endpoint, secret=None, deleted=False) -> dict:
    """The Endpoint object (docs/webhooks.md, "Several endpoints"); `secret` only in the answers
    that make or roll it, `"deleted": true` only in the answer to a delete."""
    found = {"endpointId": endpoint.id, "url": endpoint.url, "events": list(endpoint.events),
             "enabled": bool(endpoint.enabled), "description": endpoint.description,
             "createdAt": iso(endpoint.created_at)}
    if secret is not None:
        found["secret"] = secret
    if deleted:
        found["deleted"] = True
    return found


def endpoint_json(endpoint, secret=None, deleted=False) -> str:
    return dumps_compact(endpoint_object(endpoint, secret, deleted))


def endpoint_list_json(endpoints) -> str:
    return dumps_compact({"data": [endpoint_object(e) for e in endpoints]})
