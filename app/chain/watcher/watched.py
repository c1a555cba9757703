"""The watched deposit addresses, kept in memory between polls.

Read whole after a start, a rewind or a failed poll, and every FULL_READ_SECONDS; in between, the
kept set plus the payments made or changed since the last read (CLOCK_MARGIN earlier: a web
server's clock may run behind, a transaction may commit late). One set per mode (live, test),
shared by the mode's networks: money may arrive on any of them, so each network sees its own
payments (what pays) and the others' (what is unexpected there).
"""
import time
from collections import defaultdict

from app.data import payments as payment_rows
from app.data import transfers as transfer_rows

FULL_READ_SECONDS = 600  # the watched set is read whole this often; in between, what was added
CLOCK_MARGIN = 60  # seconds a payment's transaction may take between its clock and its commit


class WatchedSets:
    """The watched addresses of each mode, kept between polls."""

    def __init__(self):
        self._sets = {}  # is_test -> Watched

    def view(self, conn, network, now) -> "NetworkView":
        """The network's view of its mode's set, read whole or brought up to date first. A kept
        process that became final long ago (or one the chores have not pruned from watch_list
        yet) is left out when one of its transfers is found (transfers.final_before)."""
        kept = self._sets.get(network.is_test)
        if (kept is None or now < kept.read_at
                or time.monotonic() > kept.full_at + FULL_READ_SECONDS):
            rows = transfer_rows.watched_addresses(conn, livemode=not network.is_test)
            kept = self._sets[network.is_test] = Watched(rows, now)
        else:  # after this network's head was read: what was handed out since is paid above it
            kept.add(transfer_rows.watched_since(conn, kept.read_at - CLOCK_MARGIN,
                                                 livemode=not network.is_test), now)
        registered = {a.contract.lower() for a in payment_rows.list_assets(conn)
                      if a.network_id == network.id}
        return kept.view(network.id, registered)

    def forget(self):
        """The next poll reads the watched addresses whole (after a rewind or a failure)."""
        self._sets.clear()


class Watched:
    """The watched addresses of one mode's networks, built as rows are added: `deposits` address ->
    process id of every one, whatever network its payment chose, and per network `by_key` (token,
    address) -> WatchedAddress of the payments (and earlier choices) made on it."""

    def __init__(self, rows, read_at):
        self.deposits, self.by_network, self._recipients = {}, defaultdict(dict), None
        self.full_at = time.monotonic()
        self.add(rows, read_at)

    def add(self, rows, read_at):
        self.read_at = read_at
        if rows:
            for w in rows:
                self.deposits[w.address] = w.process_id
                self.by_network[w.network_id][(w.token_contract, w.address)] = w
            self._recipients = None

    @property
    def recipients(self):
        """The addresses, sorted (for address chunks): built when first needed after a change."""
        if self._recipients is None:
            self._recipients = sorted(self.deposits)
        return self._recipients

    def view(self, network_id, registered) -> "NetworkView":
        return NetworkView(self, self.by_network[network_id], registered)


class NetworkView:
    """What one network's scan steps use: its payments' `by_key`, the mode's `deposits` and
    `recipients`, and `registered`, the network's asset contracts (lowercase: their logs are
    strict)."""

    def __init__(self, watched, by_key, registered):
        self.watched, self.by_key, self.registered = watched, by_key, registered
        self.deposits = watched.deposits

    @property
    def recipients(self):
        return self.watched.recipients

    def match(self, entries):
        """(paying, strays): (log, WatchedAddress) of the logs that pay a watched process (its
        token on this network, to its address), and (log, process id) of the other transfers to a
        watched address (another token, or a payment chosen on another network); each of a value
        above 0 (a transfer of 0 is no payment: no record, no event)."""
        paying, strays = [], []
        for entry in entries:
            if entry.amount == 0:
                continue
            match = self.by_key.get((entry.token, entry.to_address))
            if match is not None:
                paying.append((entry, match))
                continue
            process_id = self.deposits.get(entry.to_address)
            if process_id is not None:
                strays.append((entry, process_id))
        return paying, strays
