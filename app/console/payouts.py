"""The payouts page: where the merchant's money goes (the payout address, set on the settings
page), what waits in its deposit addresses per network (read from the network's node), collecting
it with the browser wallet, and the collections (docs/console.md "Payouts"; the chain work is
app/chain/wallet_collections.py and app/chain/collect.py).

  GET  /dashboard/payouts; POST /dashboard/payouts/<networkId>/collections
"""
from flask import current_app, g, render_template, request

from app.chain import wallet_collections as wallet_payouts
from app.chain.wallet_collections import GAS_COIN_DECIMALS
from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import login_required, not_found, owner_required
from app.core.money import format_units
from app.db import get_db
from app.domain import payouts, setup
from app.evm import rpc


def _client(network):
    """A client of the network's node under the request's one deadline over all its node calls
    (REQUEST_NODE_DEADLINE_SECONDS): a slow node makes the page say so, never holds the worker."""
    deadline = g.setdefault("node_deadline", rpc.deadline_in(
        current_app.config["REQUEST_NODE_DEADLINE_SECONDS"]))
    return rpc.Client.from_config(network.rpc_url, current_app.config, deadline=deadline)


def _network_payouts(network, assets, payout):
    """What waits on one network for this merchant and what its payout address holds there, its
    browser-wallet collections settled on the way: a dict for the template. Addresses a collection
    in progress holds are not offered, only counted (`held`)."""
    found = {"id": network.id, "name": network.name, "chain_id": network.chain_id, "error": None,
             "waiting": [], "addresses": 0, "held": 0, "balance": []}
    try:
        client = _client(network)
        try:
            wallet_payouts.settle(get_db(), network, g.merchant.id, client, now())
        except rpc.RpcError as e:  # not proven yet (the watcher behind): settled on a later visit
            current_app.logger.info("payouts page: collections on %s not settled now: %s",
                                    network.id, e)
        found["balance"] = wallet_payouts.balances(client, payout, assets)
        waits, held = wallet_payouts.offer(get_db(), network, g.merchant.id, client, now())
    except rpc.RpcError:
        found["error"] = ("The network's node does not answer now, so what waits cannot be read:"
                          " try again later.")
        return found
    for asset in assets:
        if waits.totals.get(asset.contract):
            found["waiting"].append((format_units(waits.totals[asset.contract], asset.decimals),
                                     asset.symbol))
    if waits.totals.get(payouts.GAS_COIN):
        found["waiting"].append((format_units(waits.totals[payouts.GAS_COIN], GAS_COIN_DECIMALS),
                                 "of the network's gas coin"))
    found.update(factory=waits.factory, addresses=len(waits.deposits), calldata=waits.calldata,
                 batch=waits.batch, capped=waits.batch < len(waits.deposits), held=len(held))
    return found


def _collections(assets, networks):
    """The merchant's collections, newest first, each with what it moved of the merchant's."""
    symbols = {(a.network_id, a.contract.lower()): a for a in assets}
    found = []
    for c, items in payouts.collections_of(get_db(), g.merchant.id):
        moved = {}
        for i in items:
            if i.merchant_id == g.merchant.id and i.amount:  # 0: claimed, not yet mined
                moved[i.token] = moved.get(i.token, 0) + i.amount
        amounts = []
        for token, amount in sorted(moved.items()):
            asset = symbols.get((c.network_id, token.lower()))
            if asset is not None:
                amounts.append(f"{format_units(amount, asset.decimals)} {asset.symbol}")
            elif token == payouts.GAS_COIN:
                amounts.append(f"{format_units(amount, GAS_COIN_DECIMALS)} of the gas coin")
            else:
                amounts.append(f"{amount} units of {token}")
        found.append({"c": c, "network": networks.get(c.network_id, c.network_id),
                      "amounts": amounts,
                      "by": "your browser wallet" if c.recorded_by else "the operator (collect)"})
    return found


@bp.app_template_global()
def demo_wallet():
    """The demo's test wallet offered as the logged-in merchant's browser wallet ({"account",
    "rpc"}: app/demo/wallet_routes.py merchant_wallet), on the demo merchant's pages while the demo
    shop runs with its local node; None elsewhere (a production server never has it)."""
    offer = current_app.extensions.get("demo_merchant_wallet")
    merchant = g.get("merchant")
    return offer(merchant.id) if offer and merchant is not None else None


@bp.get("/payouts")
@login_required
def payouts_page(notice=None, error=None, status=200):
    notice = notice or pages.notice()
    db = get_db()
    payout = payouts.payout_of(db, g.merchant.id)
    with_factory = payouts.networks_with_factory(db)
    assets = setup.list_assets(db)
    all_networks = setup.list_networks(db)
    networks = [
        _network_payouts(n, [a for a in assets if a.network_id == n.id], payout)
        for n in all_networks
        if n.id in with_factory and n.disabled_at is None and n.is_test != g.merchant.livemode
    ] if payout else []
    return render_template("dashboard/payouts.html", payout=payout, networks=networks,
                           has_xpub=setup.has_xpub(db, g.merchant.id),
                           collections=_collections(assets, {n.id: n.name for n in all_networks}),
                           notice=notice, error=error), status


@bp.post("/payouts/<network_id>/collections")
@login_required
@owner_required
def record_collection(network_id):
    """A collection the browser wallet sent (the page posts the hash its wallet answered)."""
    network = next((n for n in setup.list_networks(get_db()) if n.id == network_id), None)
    if network is None or payouts.factory(get_db(), network_id) is None:
        raise not_found()
    try:
        wallet_payouts.record(get_db(), network, g.merchant.id,
                              (request.form.get("tx_hash") or "").strip(), _client(network), now())
    except wallet_payouts.Refused as e:
        return payouts_page(error=str(e), status=400)
    except rpc.RpcError:
        return payouts_page(error="The network's node does not answer now: the collection is not"
                            " recorded. Try again later.", status=503)
    return pages.done("dashboard.payouts_page", "collection", _anchor="collections")
