"""The processes page and its CSV export: filters, search, pages of 50 (keyset), and per process
what was paid and refunded (docs/console.md "The processes page").

  GET  /dashboard/                          processes: filters, search, pages of 50 (keyset)
  GET  /dashboard/processes.csv             what the filters show, streamed
"""
import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

from flask import Response, g, render_template, request, stream_with_context, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import PageError, login_required
from app.core import currency, jsonutil
from app.core.money import format_units
from app.core.records import STATUSES
from app.db import get_db
from app.domain import accounts, overview, payments, processes, refunds
from app.domain.representation import iso, quote_object
from app.web.http import parse_process_id

PAGE_SIZE = 50
CSV_BATCH = 500
CSV_COLUMNS = ("processId", "status", "amount", "livemode", "createdAt", "updatedAt", "expiresAt",
               "metadata", "assetId", "networkId", "amountDue", "amountPaid", "amountRefunded",
               "marks", "transferTxHashes", "transferLogIndexes", "transferBlockNumbers",
               "transferBlockHashes", "currency", "rate", "rateSource", "rateRound")


def _date(text, name, errors):
    """A YYYY-MM-DD date as unix seconds at its start (UTC), or None."""
    if not text:
        return None
    if not text.isascii():  # strptime reads other scripts' digits as these (𝟐026 as 2026)
        errors.append(f"{name}: enter a date as YYYY-MM-DD.")
        return None
    try:
        return int(datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
    except ValueError:
        errors.append(f"{name}: enter a date as YYYY-MM-DD.")
        return None


# The list's filters on money: (value of `money`, its label). A new filter is one more entry here
# and in data/processes.py CONDITIONS.
MONEY_FILTERS = [("paid", "Paid (money confirmed)"), ("partly", "Partly paid"),
                 ("overpaid", "Overpaid"), ("refunded", "Refunded")]


def _overpaid(views) -> list[str]:
    """Of these {process id: PaymentView}, the processes whose confirmed money is above what is
    due (exactly, in the token chosen): the customer sent more, which may be owed back."""
    return [process_id for process_id, view in views.items() if view.paid > view.payment.amount_due]


# The money filters SQL finds candidates for and the page checks exactly, amounts being decimal
# text: name -> {process id: PaymentView} -> the ids that meet it.
EXACT = {"partly": payments.partly_paid, "overpaid": _overpaid}


def _filters():
    """The list's filters from the query string: (filters for processes.filtered_page, form values,
    error messages). An impossible combination (another mode than the merchant's) gives None."""
    args = request.args
    form = {name: args.get(name, "").strip()
            for name in ("status", "mode", "from", "to", "q", "money", "asset", "network",
                         "unexpected", "link")}
    errors, found = [], {}
    conditions = []
    if form["money"] and form["money"] not in dict(MONEY_FILTERS):
        errors.append("money: choose one of the listed filters.")
    elif form["money"]:
        conditions.append((form["money"], None))
    if form["unexpected"]:  # the checkbox "has unexpected transfers"
        conditions.append(("unexpected", None))
    for name in ("asset", "network", "link"):  # link: the processes made from a payment link
        if form[name]:
            conditions.append((name + "=", form[name]))
    if conditions:
        found["conditions"] = conditions
    if form["status"] and form["status"] not in STATUSES:
        errors.append("status: choose one of the listed statuses.")
    elif form["status"]:
        found["status"] = form["status"]
    created_from = _date(form["from"], "From", errors)
    created_to = _date(form["to"], "To", errors)
    if created_from is not None:
        found["created_from"] = created_from
    if created_to is not None:
        found["created_before"] = created_to + 86_400  # the whole day given
    if form["mode"] not in ("", "test", "live"):
        errors.append("mode: choose test or live.")
    elif form["mode"] and (form["mode"] == "live") != g.merchant.livemode:
        found = None  # a merchant's processes all have its mode
    if found is not None and form["q"]:
        found["value"] = processes.search_value(form["q"])
        process_id = parse_process_id(form["q"])
        if process_id is not None:  # a process id, else a metadata value that looks like one
            found["process_id"] = process_id
    return found, form, errors


def _page(found, *, limit, before=None):
    """(processes, has_more) for the filters, newest first, before the process `before`. "Partly
    paid" and "overpaid" are checked exactly (EXACT) on what SQL found (money confirmed): below,
    or above, what is due."""
    exact = [EXACT[name] for name, _ in (found or {}).get("conditions", ()) if name in EXACT]
    if found is None or not exact:
        return _sql_page(found, limit=limit, before=before)
    kept = []
    while True:
        batch, more = _sql_page(found, limit=limit, before=before)
        views = payments.views(get_db(), batch)
        meets = set.intersection(*(set(check(views)) for check in exact))
        kept += [p for p in batch if p.id in meets]
        if len(kept) >= limit or not more:
            return kept[:limit], len(kept) > limit or more
        before = batch[-1].id


def _sql_page(found, *, limit, before=None):
    if found is None:
        return [], False
    found = dict(found)
    process_id = found.pop("process_id", None)
    if process_id is not None:  # that one process, if it is this merchant's
        try:
            process = processes.get(get_db(), g.merchant.id, process_id)
        except processes.ProcessNotFound:
            pass
        else:
            return [process] if _matches(process, found) else [], False
    before_seq = None
    if before:
        anchor = parse_process_id(before)
        try:
            before_seq = processes.get(get_db(), g.merchant.id, anchor).seq if anchor else None
        except processes.ProcessNotFound:
            before_seq = None
        if before_seq is None:
            raise PageError(400, "No such page",
                            "The page asked for does not exist: start from the first page.")
    return processes.filtered_page(get_db(), g.merchant.id, now=now(), limit=limit,
                                   before_seq=before_seq, **found)


def _matches(process, found):
    """The other filters, for the one process a process-id search found."""
    if not (found.get("status") in (None, process.effective_status(now()))
            and process.created_at >= found.get("created_from", process.created_at)
            and process.created_at < found.get("created_before", process.created_at + 1)):
        return False
    conditions = found.get("conditions")
    if not conditions:
        return True
    if not processes.meets(get_db(), process.id, conditions):
        return False
    views = payments.views(get_db(), [process])
    return all(EXACT[name](views) for name, _ in conditions if name in EXACT)


def _summary(metadata):
    """A short view of a process's metadata for the list: its scalar "key: value" items, at most
    80 characters in all (the last one cut with "…"). A list: each item is shown unbroken, lines
    breaking only between items."""
    items, left = [], 80
    for k, v in json.loads(metadata).items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            continue
        item = f"{k}: {v}".replace("\x00", "\ufffd")  # HTML has no NUL: what a browser would show
        if len(item) > left:
            items.append(item[:max(left - 1, 0)] + "…")
            break
        items.append(item)
        left -= len(item) + 2  # and its ", "
        if left <= 0:
            break
    return items


def _money(batch, names=None) -> dict:
    """Per process of `batch` with an on-chain payment: what was paid (confirmed) and refunded
    (completed), in token units, on which asset and network, and its marks: {process id: dict}."""
    if not batch:
        return {}
    symbols, networks = names or pages.names()
    views = payments.views(get_db(), batch)
    refunded = refunds.of_processes(get_db(), batch)
    current, found = now(), {}
    for p in batch:
        view = views.get(p.id)
        if view is None:
            continue
        pay = view.payment
        counted = [t for t in view.transfers if t.status == "confirmed"]
        paid = sum(t.amount for t in counted)
        # A refund is in its own token's units: the payment's, unless the choice changed since.
        back = sum(Decimal(r.amount).scaleb(-r.decimals) for r in refunded.get(p.id, ())
                   if r.status == "completed")
        marks = []
        if 0 < paid < pay.amount_due and p.effective_status(current) != "completed":
            marks.append("partly paid")
        if view.paid > pay.amount_due:
            marks.append("overpaid")
        if back:
            marks.append("refunded" if back >= Decimal(paid).scaleb(-pay.decimals)
                         else "partly refunded")
        found[p.id] = {
            "asset_id": pay.asset_id, "network_id": pay.network_id,
            "symbol": symbols.get((pay.asset_id, pay.network_id), pay.asset_id),
            "network": networks.get(pay.network_id, pay.network_id),
            "due": format_units(pay.amount_due, pay.decimals),
            "paid": format_units(paid, pay.decimals),
            "refunded": overview.text(back), "marks": marks, "proof": _chain_proof(counted),
            "quote": quote_object(pay)}
    return found


@bp.get("/")
@login_required
def processes_page():
    found, form, errors = _filters()
    items, has_more = (([], False) if errors
                       else _page(found, limit=PAGE_SIZE, before=request.args.get("before")))
    query = {k: v for k, v in form.items() if v}
    current = now()
    money = _money(items)
    rows = [{"process": p, "status": p.effective_status(current), "summary": _summary(p.metadata),
             "money": money.get(p.id)} for p in items]
    symbols, networks = pages.names()
    assets = sorted({(asset_id, symbol) for (asset_id, _), symbol in symbols.items()})
    next_url = (url_for("dashboard.processes_page", **query, before=items[-1].id) if has_more
                else None)
    return render_template("dashboard/processes.html", rows=rows, form=form, errors=errors,
                           statuses=STATUSES, next_url=next_url, money_filters=MONEY_FILTERS,
                           assets=assets, networks=sorted(networks.items()),
                           first_page=bool(request.args.get("before")),
                           first_url=url_for("dashboard.processes_page", **query),
                           csv_url=url_for("dashboard.processes_csv", **query), query=query,
                           columns=request.args.get("columns", "")), 400 if errors else 200


# The worker's heartbeat, where gunicorn_workers.py's worker classes put one (not under flask run).
HEARTBEAT = "preorder.heartbeat"


@bp.get("/processes.csv")
@login_required
def processes_csv():
    """Streamed without a Content-Length: over HTTP/1.1 (and from nginx, proxy_http_version 1.1)
    the body is chunked, so an export cut short (a killed worker, an error) lacks the last chunk
    and no client takes it for a whole file. The worker's heartbeat after each batch keeps
    gunicorn's timeout from killing an export that is making progress (docs/console.md)."""
    found, _, errors = _filters()
    keys = _metadata_keys(request.args.get("columns", ""), errors)
    if errors:
        raise PageError(400, "Export refused", " ".join(errors))
    db, user_id = get_db(), g.user.id
    if not accounts.begin_export(db, user_id, now()):
        raise PageError(429, "An export is running",
                        "One export at a time: yours is still being sent (in another tab or"
                        " window). Try again once it has finished.",
                        {"Retry-After": str(accounts.EXPORT_SLOT_SECONDS)})
    heartbeat = request.environ.get(HEARTBEAT, lambda: None)

    def rows():
        """The rows in batches of CSV_BATCH (keyset): memory stays flat however many there are."""
        try:
            yield from _csv(found, heartbeat, lambda: accounts.keep_export(db, user_id, now()),
                            keys)
        finally:  # sent whole, or the client went away
            accounts.end_export(db, user_id)

    response = Response(stream_with_context(rows()), mimetype="text/csv",
                        headers={"Content-Disposition": 'attachment; filename="processes.csv"'})
    response.call_on_close(lambda: accounts.end_export(db, user_id))  # even if never started
    return response


# The export form's "metadata keys as columns": at most this many keys, each at most this long.
MAX_METADATA_COLUMNS = 20
MAX_METADATA_KEY = 100


def _metadata_keys(text, errors) -> list[str]:
    """The metadata keys the export form names (comma-separated, trimmed, each once), each one more
    column "metadata.<key>" after the others; none by default (the metadata stays one JSON cell)."""
    keys = list(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    if len(keys) > MAX_METADATA_COLUMNS:
        errors.append(f"columns: name at most {MAX_METADATA_COLUMNS} metadata keys.")
    if any(len(k) > MAX_METADATA_KEY for k in keys):
        errors.append(f"columns: a metadata key has at most {MAX_METADATA_KEY} characters.")
    return keys


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _metadata_cells(metadata, keys):
    """The process's value of each key as a cell: a string as it is (one a spreadsheet would take
    for a formula, starting with =, +, -, @, a tab or a CR, behind a `'`), a number as written, true
    or false, nothing for null or a missing key, an object or a list as compact JSON."""
    if not keys:
        return ()
    data = jsonutil.loads(metadata.encode("utf-8"))
    cells = []
    for key in keys:
        value = data.get(key)
        if value is None:
            cells.append("")
        elif isinstance(value, bool):
            cells.append("true" if value else "false")
        elif isinstance(value, jsonutil.JSONNumber):
            cells.append(str(value))
        elif isinstance(value, str):
            # a spreadsheet reads a cell starting with one of these as a formula
            cells.append("'" + value if value[:1] in FORMULA_STARTS else value)
        else:
            cells.append(jsonutil.dumps_compact(value))
    return cells


def _amount(value, places) -> str:
    """An amount as every amount column writes it: plain decimal, exact, with the process currency's
    places at least ("25.50" beside "25.50", never "25.5"), more only where the value has them."""
    if value in ("", None):
        return ""
    whole, _, fraction = format(Decimal(value), "f").partition(".")
    fraction = fraction.rstrip("0").ljust(places, "0")
    return f"{whole}.{fraction}" if fraction else whole


def _csv(found, heartbeat, progress, keys=()):
    """The export's text, a batch of CSV_BATCH rows (keyset) at a time: memory stays flat however
    many there are; `heartbeat` and `progress` are called after each batch. `keys`: metadata keys
    that get a column each, after the others."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow((*CSV_COLUMNS, *(f"metadata.{k}" for k in keys)))
    before, names = None, pages.names()
    while True:
        batch, more = _page(found, limit=CSV_BATCH, before=before)
        current = now()
        money = _money(batch, names)  # what was paid against what was due, and refunded
        for p in batch:
            places = currency.minor_digits(p.currency)
            writer.writerow((p.id, p.effective_status(current), _amount(p.amount, places),
                             "true" if p.livemode else "false",
                             iso(p.created_at), iso(p.effective_updated_at(current)),
                             iso(p.expires_at), p.metadata,
                             *_money_columns(money.get(p.id), places),
                             *_price_columns(p, money.get(p.id)),
                             *_metadata_cells(p.metadata, keys)))
        yield out.getvalue()
        heartbeat()
        progress()
        out.seek(0)
        out.truncate()
        if not more:
            return
        before = batch[-1].id


def _money_columns(money, places):
    """The CSV's payment columns: asset, network, amount due, confirmed amount paid and completed
    refunds, in token units written as `_amount` writes them (a payment completed under the
    merchant's tolerance shows paid below due), the list's marks joined by "; ", and the chain
    proof (`_chain_proof`); empty without an on-chain payment."""
    if money is None:
        return ("",) * 10
    return (money["asset_id"], money["network_id"],
            *(_amount(money[k], places) for k in ("due", "paid", "refunded")),
            "; ".join(money["marks"]), *money["proof"])


def _price_columns(process, money):
    """The CSV's last columns: the process's currency (always: its amount is in it), and the
    payment's locked quote (representation.quote_object): its rate ("1" at par), source (feed,
    manual, par) and a feed's round; those three empty without an on-chain payment. A payment made
    before quotes was at par: "1", "par"."""
    if money is None:
        return process.currency, "", "", ""
    quote = money["quote"]
    return process.currency, quote["rate"], quote["source"], quote["roundId"] or ""


def _chain_proof(counted):
    """The CSV's chain proof of what `amountPaid` counts: per confirmed transfer (an accepted
    unexpected one included), its transaction hash, log index, block number and block hash, each
    column a space-separated list in the same order."""
    return (" ".join(t.tx_hash for t in counted), " ".join(str(t.log_index) for t in counted),
            " ".join(str(t.block_number) for t in counted), " ".join(t.block_hash for t in counted))
