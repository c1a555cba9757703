"""Unexpected transfers (another token, or a payment chosen on another network, to a watched deposit
address): recorded `seen` by the scan step, confirmed here once deep enough and proven (by the
confirm phase), each with what its contract says of itself and its one `payment.unexpected`.
Never credited: the process keeps its state (docs/payments.md, "Money that arrives the wrong way").
"""
import logging

from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import transfers as transfer_rows
from app.data import unexpected as unexpected_rows
from app.data.transfers import UNEXPECTED
from app.domain.outbox import emit
from app.evm import tokens

log = logging.getLogger("app.chain.watcher")

CONFIRM_BATCH = 200  # transfers reported per transaction (each with its event)


def report(db, client, network, head, strays, now, described):
    """Confirm `strays` (deep enough and proven: the caller's), CONFIRM_BATCH a commit.
    `described`: the watcher's cache of what contracts answered (`describe`)."""
    if not strays:
        return
    found = describe(db, client, network, {t.token_contract for t in strays}, described)
    reported = 0
    for i in range(0, len(strays), CONFIRM_BATCH):
        with db.transaction() as conn:
            transfer_rows.set_head(conn, network.id, head)
            for t in strays[i:i + CONFIRM_BATCH]:
                if not transfer_rows.confirm(conn, t, now, table=UNEXPECTED):
                    continue
                unexpected_rows.describe(conn, t, *found[t.token_contract])
                if unexpected_rows.report(conn, t, now):
                    emit(conn, "payment.unexpected", process_rows.get(conn, t.process_id), now)
                    reported += 1
    if reported:
        log.info("watch %s: %d unexpected transfers reported (payment.unexpected)", network.id,
                 reported)


def describe(db, client, network, contracts, described) -> dict:
    """{contract: (symbol, decimals)}: a registered asset of the network from its row, another
    contract from what it answers (app/evm/tokens.py, never a fault), asked once a watcher
    (`described`: (chain id, contract) -> the answer)."""
    assets = {a.contract.lower(): (a.symbol, a.decimals)
              for a in payment_rows.list_assets(db.connection()) if a.network_id == network.id}
    found = {c: assets.get(c, described.get((network.chain_id, c))) for c in contracts}
    unknown = [c for c, known in found.items() if known is None]
    for contract, answer in tokens.describe(client, unknown).items():
        found[contract] = described[(network.chain_id, contract)] = answer
    return found
