"""Exchange rates and quotes: what a process priced in one currency is due in a token pegged to
another (docs/payments.md, "Prices in the merchant's currency").

A pair "EUR/USD" is the price of one EUR in USD. Its one source is a price feed read by the chain
watcher (`record_reads`, each poll) or a manual rate (`set_manual`). Whether its last answer counts
now is `state`: a feed's answer must be positive, of a complete round, not from the future and
within its max age; on an L2 the sequencer must have been up for an hour. A quote (`quote`) uses
the pair's rate as it stands, exactly, rounded up to the token's base units, and never a chain of
two rates. It is made at confirm from the database alone: a confirm never waits on a node.
"""
import json
import logging
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from app.core import currency
from app.core.jsonutil import dumps_compact
from app.core.money import format_units, significant_places
from app.core.records import Rate
from app.data import payments as payment_rows
from app.data import rates as rate_rows
from app.domain.representation import iso
from app.evm import addresses, feeds, rpc

log = logging.getLogger("app.rates")

FEED_MAX_AGE = 90_000  # a day's heartbeat and an hour
MANUAL_MAX_AGE = 86_400
SEQUENCER_GRACE = 3_600  # seconds a sequencer must have been up for its network's rates to count
MAX_DEPEG = "2"  # percent
RETRY_AFTER_SECONDS = 60
MAX_RATE_PLACES = 18
MAX_TIME = 253_402_300_799  # 9999-12-31T23:59:59Z: a later time is no clock's (and prints as none)


class RateUnavailable(Exception):
    """No rate that counts now for the chosen asset: 503 rate_unavailable, try later or another."""

    def __init__(self, asset_id, network_id, why):
        super().__init__(f"{asset_id} on {network_id} cannot be quoted now ({why}): try again"
                         " later, or choose another asset.")
        self.asset_id, self.network_id = asset_id, network_id


class RateError(ValueError):
    """An operator's rate command cannot be done; str() says why."""


# --- whether a rate counts -----------------------------------------------------------------------

def state(rate: Rate, now) -> tuple[str, str | None]:
    """("ok", None), ("stale", why) or ("invalid", why) for the rate's last answer at `now`."""
    if rate.problem:
        return "invalid", rate.problem
    if rate.value is None or rate.updated_at is None:
        return "stale", "not read yet (the chain watcher reads it on its next poll)"
    if rate.updated_at > now:
        return "invalid", "its round's updatedAt is in the future"
    age = now - rate.updated_at
    if age > rate.max_age:
        return "stale", f"{age} s old, above its max age of {rate.max_age} s"
    if rate.sequencer_feed:
        if rate.sequencer_answer is None:
            return "invalid", "the sequencer uptime feed did not answer"
        if rate.sequencer_answer != 0:
            return "invalid", "the network's sequencer is down"
        up = now - (rate.sequencer_since or now)
        if up < SEQUENCER_GRACE:
            return "invalid", (f"the sequencer has been up for {max(up, 0)} s,"
                               f" under {SEQUENCER_GRACE} s")
    return "ok", None


def answer_problem(rnd: feeds.Round) -> str | None:
    """Why a feed's latest round cannot count whatever the time (None: it may)."""
    if rnd.answer <= 0:
        return f"its answer {rnd.answer} is not above 0"
    if rnd.answered_in_round < rnd.round_id:
        return (f"round {rnd.round_id} was answered in the earlier round {rnd.answered_in_round}"
                " (answeredInRound < roundId)")
    if rnd.updated_at == 0:
        return f"round {rnd.round_id} is not complete (updatedAt 0)"
    if rnd.updated_at > MAX_TIME:
        return "its round's updatedAt is in the future"
    return None


def with_round(rate: Rate, rnd: feeds.Round | None, sequencer: feeds.Round | None, problem,
               now) -> Rate:
    """The rate with a feed's latest round (and its sequencer's) as read at `now`."""
    problem = problem or (answer_problem(rnd) if rnd is not None else None)
    value = None if rnd is None or rnd.answer <= 0 else format_units(rnd.answer, rate.feed_decimals)
    return replace(
        rate, value=value, problem=problem, read_at=now,
        round_id=None if rnd is None else str(rnd.round_id),
        answered_in_round=None if rnd is None else str(rnd.answered_in_round),
        updated_at=None if rnd is None or rnd.updated_at > MAX_TIME else rnd.updated_at,
        sequencer_answer=None if sequencer is None else max(min(sequencer.answer, 2), -1),
        sequencer_since=None if sequencer is None or sequencer.started_at > MAX_TIME
        else sequencer.started_at)


# --- quotes --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quote:
    amount_due: int  # the token's base units
    text: str  # the `quote` object, compact JSON


def quote(process, asset, rates: dict, now) -> Quote:
    """What `process` is due in `asset` now (RateUnavailable when it cannot be quoted), rounded up
    to a base unit so rounding never short-changes the shop; AmountError-free: any amount quotes."""
    guard = _peg_guard(asset, rates, now)
    if guard:
        raise RateUnavailable(asset.id, asset.network_id, guard)
    fields = {"currency": process.currency, "amount": process.amount}
    if process.currency == asset.peg:
        value, rate, inverse = Fraction(1), None, False
    else:
        rate, inverse, why = _pair_for(process.currency, asset.peg, rates, now)
        if rate is None:
            raise RateUnavailable(asset.id, asset.network_id, why)
        value = Fraction(Decimal(rate.value))
    exact = Fraction(Decimal(process.amount)) * 10 ** asset.decimals
    exact = exact / value if inverse else exact * value
    due = -(-exact.numerator // exact.denominator)
    fields.update(
        rate="1" if rate is None else rate.value, pair=None if rate is None else rate.pair,
        inverse=inverse, source="par" if rate is None else rate.source,
        networkId=rate.network_id if rate is not None and rate.source == "feed" else None,
        feed=rate.feed if rate is not None and rate.source == "feed" else None,
        roundId=rate.round_id if rate is not None and rate.source == "feed" else None,
        rateUpdatedAt=None if rate is None else iso(rate.updated_at), quotedAt=iso(now))
    return Quote(due, dumps_compact(fields))


def quote_problem(amount, code, decimals, quote_text, due) -> str | None:
    """Why a payment's amount due (base units) is not what its locked quote gives for the process's
    `amount` in `code` (None: it is). A payment made before quotes was due the amount at par."""
    if quote_text is None:
        fields = {"currency": "USD", "amount": amount, "rate": "1", "inverse": False}
    else:
        fields = json.loads(quote_text)
    if fields["currency"] != code or Decimal(fields["amount"]) != Decimal(amount):
        return (f"the quote is for {fields['amount']} {fields['currency']}, the process is"
                f" {amount} {code}")
    exact = Fraction(Decimal(amount)) * 10 ** decimals
    rate = Fraction(Decimal(fields["rate"]))
    if rate <= 0:
        return f"its rate {fields['rate']} is not above 0"
    exact = exact / rate if fields["inverse"] else exact * rate
    expected = -(-exact.numerator // exact.denominator)
    if expected != due:
        return f"{amount} {code} at {fields['rate']} is {expected} base units"
    return None


def _pair_for(code, peg, rates, now):
    """(rate, inverse, why-not): `code/peg` (due = amount × rate) or else `peg/code` (amount ÷
    rate), whichever counts now; never a chain of two."""
    why = f"no rate for {code}/{peg}"
    for pair, inverse in ((f"{code}/{peg}", False), (f"{peg}/{code}", True)):
        rate = rates.get(pair)
        if rate is None:
            continue
        found, reason = state(rate, now)
        if found == "ok":
            return rate, inverse, None
        why = f"{pair} is {found}: {reason}"
    return None, False, why


def _peg_guard(asset, rates, now) -> str | None:
    """Why the asset is not worth its peg now (None: it is, or no feed watches it): a pair
    SYMBOL/PEG that does not count, or is more than its max depeg from 1."""
    rate = rates.get(f"{asset.symbol.upper()}/{asset.peg}")
    if rate is None:
        return None
    found, reason = state(rate, now)
    if found != "ok":
        return f"its peg guard {rate.pair} is {found}: {reason}"
    if abs(Decimal(rate.value) - 1) * 100 > Decimal(rate.max_depeg):
        return f"{rate.pair} is {rate.value}, more than {rate.max_depeg} % from 1"
    return None


def rates_for(conn, livemode) -> dict:
    """The rates a process of this mode may be quoted with: manual ones, and feeds read on a network
    of its mode (a test network's feed, whose answer anyone may set, never prices a live sale)."""
    test = {n.id for n in payment_rows.list_networks(conn) if n.is_test}
    return {pair: r for pair, r in rate_rows.all_rates(conn).items()
            if r.source != "feed" or (r.network_id in test) != bool(livemode)}


# --- the operator's commands ---------------------------------------------------------------------

def _check_pair(pair) -> tuple[str, str]:
    try:
        return currency.check_pair(pair)
    except ValueError as e:
        raise RateError(str(e)) from None


def _check_max_age(seconds):
    if seconds < 1:
        raise RateError("The max age must be at least 1 second.")


def _check_depeg(text) -> str:
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        value = None
    if (value is None or not value.is_finite() or not 0 < value <= 50
            or significant_places(value) > 2):
        raise RateError("The max depeg is a percentage above 0 and at most 50, with at most two"
                        " decimal places (e.g. 2).")
    return format(value.normalize(), "f")


def _feed_address(text, what):
    if not addresses.is_checksum_valid(text or ""):
        raise RateError(f"The {what} must be 0x followed by 40 hexadecimal digits, with a valid"
                        " EIP-55 checksum when it mixes upper and lower case.")
    return addresses.to_checksum_address(text)


def add_feed(db, pair, *, network_id, feed, now, max_age=FEED_MAX_AGE, sequencer_feed=None,
             max_depeg=MAX_DEPEG, client_factory=rpc.Client) -> Rate:
    """Make a price feed the pair's source, after reading it through the network's node: it must
    answer, its description must name the pair ("EUR / USD"), and its answer must count now (the
    sequencer's too, when given)."""
    base, quote_code = _check_pair(pair)
    pair = f"{base}/{quote_code}"
    _check_max_age(max_age)
    max_depeg = _check_depeg(max_depeg)
    feed = _feed_address(feed, "feed")
    sequencer_feed = sequencer_feed and _feed_address(sequencer_feed, "sequencer feed")
    network = payment_rows.get_network(db.connection(), network_id)
    if network is None or network.disabled_at is not None:
        raise RateError(f"No enabled network {network_id}.")
    client = client_factory(network.rpc_url)
    try:
        decimals, description, rnd = feeds.read_feed(client, feed, network.chain_id)
        sequencer = (feeds.read_feed(client, sequencer_feed, network.chain_id)[2]
                     if sequencer_feed else None)
    except rpc.RpcError as e:
        raise RateError(f"Could not read the feed {feed} through the node of network {network_id}:"
                        f" {e}. Check the address and the network.") from None
    if decimals is None or decimals > 36:
        raise RateError(f"The feed {feed} answers no decimals() of a price feed.")
    named = (description or "").replace(" ", "").upper()
    if named != f"{base}/{quote_code}".upper():
        raise RateError(f"The feed {feed} is {description!r}, not {base} / {quote_code}: check the"
                        " address, or the pair's order.")
    rate = with_round(Rate(
        pair=pair, source="feed", network_id=network_id, feed=feed, feed_decimals=decimals,
        sequencer_feed=sequencer_feed, max_age=max_age, max_depeg=max_depeg, value=None,
        round_id=None, answered_in_round=None, updated_at=None, sequencer_answer=None,
        sequencer_since=None, problem=None, read_at=None, reported=None, created_at=now,
    ), rnd, sequencer, None, now)
    found, why = state(rate, now)
    if found != "ok":
        raise RateError(f"The feed's answer would not count now: {why}.")
    rate = replace(rate, reported="ok")
    with db.transaction() as conn:
        rate_rows.put(conn, rate)
    return rate


def set_manual(db, pair, value, *, now, max_age=MANUAL_MAX_AGE, max_depeg=MAX_DEPEG) -> Rate:
    """Make the operator's own rate the pair's source, counting for `max_age` from now."""
    pair = "/".join(_check_pair(pair))
    _check_max_age(max_age)
    max_depeg = _check_depeg(max_depeg)
    try:
        exact = Decimal(str(value).strip())
    except InvalidOperation:
        exact = None
    if exact is None or not exact.is_finite() or exact <= 0 \
            or significant_places(exact) > MAX_RATE_PLACES or exact >= 10**12:
        raise RateError(f"The rate must be a positive decimal number below 10^12 with at most"
                        f" {MAX_RATE_PLACES} decimal places (e.g. 1.0842).")
    text = format(exact.normalize(), "f")
    rate = Rate(pair=pair, source="manual", network_id=None, feed=None, feed_decimals=None,
                sequencer_feed=None, max_age=max_age, max_depeg=max_depeg, value=text,
                round_id=None, answered_in_round=None, updated_at=now, sequencer_answer=None,
                sequencer_since=None, problem=None, read_at=None, reported="ok", created_at=now)
    with db.transaction() as conn:
        rate_rows.put(conn, rate)
    return rate


def remove(db, pair):
    base, slash, quote_code = str(pair).partition("/")
    pair = f"{base.upper()}{slash}{quote_code}"  # as stored: a symbol in capitals
    with db.transaction() as conn:
        if not rate_rows.remove(conn, pair):
            raise RateError(f"No rate for {pair}.")


def listing(db, now) -> list[tuple[Rate, str, str | None]]:
    """Every pair's rate with its state and why, by pair."""
    return [(r, *state(r, now)) for r in rate_rows.all_rates(db.connection()).values()]


def set_peg(db, asset_id, peg, network_id=None) -> int:
    try:
        currency.check(peg)
    except ValueError as e:
        raise RateError(f"The peg: {e}") from None
    with db.transaction() as conn:
        changed = payment_rows.set_peg(conn, asset_id, peg, network_id)
    if not changed:
        where = f" on network {network_id}" if network_id else ""
        raise RateError(f"No asset {asset_id}{where}.")
    return changed


# --- the chain watcher's reads -------------------------------------------------------------------

def feed_calls(conn, network_id) -> tuple[list, list]:
    """(the network's feeds, the calls that read them and their sequencer feeds, one per contract)
    for the watcher's first batch; nothing when the network has no feed."""
    rates = rate_rows.feeds_of(conn, network_id)
    contracts = list(dict.fromkeys([r.feed for r in rates] + [r.sequencer_feed for r in rates
                                                              if r.sequencer_feed]))
    return rates, [(contract, feeds.latest_call(contract)) for contract in contracts]


def record_reads(db, network_id, rates, answers, now):
    """Keep what the watcher read of each feed ({contract: eth_call answer or RpcError}) with its
    round, and log a rate whose state changed (once, not on every poll). An answer that did not
    change since the last poll is not written again: an idle poll commits nothing more."""
    updated = []
    for rate in rates:
        rnd, problem = _parsed(answers.get(rate.feed), "the feed")
        if rnd is not None and rate.round_id is not None and rnd.round_id < int(rate.round_id):
            log.info("rate %s (feed on %s): round %s is older than round %s already read (a"
                     " lagging node): kept the newer", rate.pair, network_id, rnd.round_id,
                     rate.round_id)
            continue
        sequencer, seq_problem = (_parsed(answers.get(rate.sequencer_feed), "the sequencer feed")
                                  if rate.sequencer_feed else (None, None))
        read = with_round(rate, rnd, sequencer, problem or seq_problem, now)
        found, why = state(read, now)
        shown = "ok" if found == "ok" else f"{found}: {why}"
        if shown != rate.reported:
            report = log.info if found == "ok" else log.warning
            report("rate %s (feed on %s): %s", rate.pair, network_id,
                   f"ok, {read.value} in round {read.round_id}" if found == "ok" else shown)
        read = replace(read, reported=shown)
        if replace(read, read_at=rate.read_at) != rate:
            updated.append(read)
    if not updated:
        return
    with db.transaction() as conn:
        for rate in updated:
            rate_rows.record_read(conn, rate)


def _parsed(answer, what):
    """(Round, None) or (None, why) for one feed call's answer."""
    if isinstance(answer, rpc.RpcError) or answer is None:
        return None, f"{what} did not answer latestRoundData()"
    try:
        return feeds.parse_round(answer), None
    except rpc.Malformed:
        return None, f"{what} answered latestRoundData() out of the ABI's form"
