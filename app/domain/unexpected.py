"""Staff accepting an unexpected transfer as payment (the console's "Accept as payment", and
`POST …/process/<processId>/unexpected-transfers/<txHash>:<logIndex>/accept`): money that arrived
the wrong way (another token, or another network) counted as if paid with the payment's choice.

Only a confirmed transfer of a registered asset on its network can be accepted (a token nobody
registered has no agreed value), once: it then counts in `amountPaid` for its amount in the
payment's token units, converted exactly from the asset's decimals (1:1 in token units; what a
coarser payment token cannot hold is left out, never more than was sent). The acceptance, who made
it and when, the process's outcome and its event are one transaction, decided as for a confirmed
transfer (settlement.settle, as the watcher's): `payment.completed` when it brings the in-time sum
to the amount due less the tolerance, `payment.partial` below it, `payment.received_late` for a
final process or a transfer after the expiry."""
import re

from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import unexpected as unexpected_rows
from app.data.payments import _rescaled
from app.domain.processes import InvalidState, ProcessNotFound
from app.domain.settlement import settle


class TransferNotFound(LookupError):
    """No such unexpected transfer of this process (or a malformed `<txHash>:<logIndex>`)."""


class NotAcceptable(InvalidState):
    """The transfer cannot be accepted as payment now; str() says why."""

    def __init__(self, message):
        ValueError.__init__(self, message)
        self.status = None


# `<txHash>:<logIndex>` in ASCII only: explicit classes, never `\d` or str.isdigit(), which take
# other scripts' digits ("٣" read as 3, "³" raising in int()). The web layers refuse a key with a
# character outside ASCII before it comes here (app/web/http.py ascii_text); here it is simply no
# key.
_KEY = re.compile(r"(0x[0-9a-fA-F]{64}):([0-9]{1,9})")


def parse_key(text) -> tuple[str, int] | None:
    """`<txHash>:<logIndex>` as (lowercase hash, index), or None."""
    found = _KEY.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        return None
    return found[1].lower(), int(found[2])


def accept(db, merchant_id, process_id, key, who, now):
    """Accept the process's unexpected transfer named `key` as payment, recorded as done by `who`
    (a console user, a secret key). Returns (process, view) as they are after it.
    ProcessNotFound, TransferNotFound, NotAcceptable (409 invalid_state)."""
    parsed = parse_key(key)
    now = int(now)
    with db.transaction() as conn:
        process_rows.lock(conn, process_id)
        process = process_rows.get_for_merchant(conn, merchant_id, process_id)
        if process is None:
            raise ProcessNotFound(process_id)
        transfer = None if parsed is None else unexpected_rows.get(conn, process_id, *parsed)
        payment = payment_rows.get_payment(conn, process_id)
        if transfer is None or payment is None or transfer.status in ("seen", "orphaned"):
            raise TransferNotFound(key)
        if transfer.status != "confirmed":
            raise NotAcceptable(f"Transfer {transfer.key} left the chain in a reorganisation: there"
                                " is nothing to accept.")
        if transfer.accepted_at is not None:
            raise NotAcceptable(f"Transfer {transfer.key} was already accepted as payment"
                                f" ({transfer.accepted_by}).")
        asset = payment_rows.asset_with_contract(conn, transfer.network_id, transfer.token_contract)
        if asset is None:
            raise NotAcceptable(
                f"Transfer {transfer.key} is of {transfer.token_contract}, which is no registered"
                f" asset on network {transfer.network_id}: it cannot be accepted as payment (refund"
                " it, or collect it with collect --token).")
        chosen = payment_rows.get_asset(conn, payment.asset_id, payment.network_id)
        if chosen is not None and chosen.peg != asset.peg:
            raise NotAcceptable(
                f"Transfer {transfer.key} is of {asset.symbol}, worth a {asset.peg}, and the"
                f" payment is due in {chosen.symbol}, worth a {chosen.peg}: it cannot count one for"
                " one (refund it, or collect it with collect --token).")
        credited = _rescaled(transfer.amount, asset.decimals, payment.decimals)
        if not unexpected_rows.accept(conn, transfer, who, credited, now):
            raise NotAcceptable(f"Transfer {transfer.key} cannot be accepted now: try again.")
        view = payment_rows.view_of(conn, process_id)
        counted = next(t for t in view.transfers if t.accepted and t.tx_hash == transfer.tx_hash
                       and t.log_index == transfer.log_index and t.chain_id == transfer.chain_id)
        settle(conn, process, view, [counted], now)
        process = process_rows.get(conn, process_id)
        view = payment_rows.view_of(conn, process_id)
    return process, view
