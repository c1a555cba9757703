"""The watcher's loop: which networks, when, one poll of each (`Watcher.poll_network`), the backoff
of a failing one, and each poll's outcome written to the network's row (app/domain/health.py reads
it). The package docstring (app/chain/watcher/__init__.py) maps a poll's parts.

Each network is polled in a thread of its own (named `watch <id>`), so a node that is slow or does
not answer holds back its own network only (docs/payments.md, "The chain watcher"). The main thread
reads the enabled networks every `poll_interval` and starts a thread for a network that has none;
a network's thread ends once it is no longer enabled, or on `stop()`, after its poll. What a
network's polls keep (its clients, failures, next poll, watched set) is its thread's alone; the
database gives each thread its own connection, held only while it polls.

Each poll first takes or renews the network's lease (lease.py): a network another watcher process
holds is not polled here (no JSON-RPC call), and is taken over once that lease expires. The poll's
transactions renew it too, and write nothing once another holds it (LeaseLost). A watcher that
stops gives its leases up, so a standby takes over at its next poll.
"""
import logging
import threading
import time
from collections import Counter, defaultdict
from dataclasses import replace

from app.backoff import doubling
from app.chain import collection_records, refunds
from app.chain.watcher import confirm, reorg
from app.chain.watcher.lease import Fenced, Lease, LeaseLost, owner_token
from app.chain.watcher.record import LostRace, outcomes_text, record_step
from app.chain.watcher.watched import WatchedSets
from app.chain.watcher.window import deep_enough, first_reads, read_window, step_pins
from app.config import DEFAULTS
from app.data import payments as payment_rows
from app.data import transfers as transfer_rows
from app.domain import health, rates
from app.evm.rpc import ChainMoved, Client, RpcError, WrongChain, redacted

log = logging.getLogger("app.chain.watcher")

MAX_RANGE = 2_000  # blocks per eth_getLogs: providers refuse wider ranges (often 2k–10k)
MAX_ADDRESSES = 500  # deposit addresses per eth_getLogs (topic OR-list)


def _summary(error) -> str:
    """An exception in one log line: its class and the first line of its message (PostgreSQL's
    go on with the statement's text)."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}"


class Watcher:
    def __init__(self, db, *, clock, monitoring_seconds=86_400, poll_interval=5.0,
                 max_range=MAX_RANGE, max_addresses=MAX_ADDRESSES, backoff_base=1.0,
                 backoff_max=60.0, config=DEFAULTS, networks=None):
        self.db, self.clock = db, clock
        self.monitoring_seconds = monitoring_seconds
        self.poll_interval, self.max_range = poll_interval, max_range
        self.max_addresses = max_addresses
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.config = config  # the CHAIN_RPC_* timeouts, NETWORK_STALE_SECONDS
        self.stale_seconds = int(config.get("NETWORK_STALE_SECONDS", 60))
        self.only = set(networks) if networks else None  # network ids to watch (None: every one)
        self.lease_seconds = float(config.get("WATCHER_LEASE_SECONDS", 15))
        self.owner = owner_token()  # this process, in the lease rows and the logs
        self.stopping = False
        self._wake = threading.Event()  # set by stop(): every thread's wait ends
        self._enabled = set()  # the network ids the loop polls now (replaced whole, never changed)
        self._pollers = {}  # network id -> its thread (the main thread's alone)
        # Each network's own, used by its thread alone:
        self._clients = {}  # (network id, URL) -> Client
        self._failures = defaultdict(int)  # network id -> consecutive failed polls
        self._next_poll = {}  # network id -> time.monotonic() of its next poll
        self._watched = {}  # network id -> WatchedSets, kept between its polls
        self._leases = {}  # network id -> Lease
        self._holding = {}  # network id -> whether its last attempt held the lease (None: none yet)
        # Shared, each entry written by one network's thread (a set's add and a dict's get and
        # set are atomic in CPython):
        self._busy = set()  # networks whose token logs are too many to filter here
        self._described = {}  # (chain id, contract) -> (symbol, decimals) its contract answered

    @classmethod
    def from_app(cls, app, **options):
        config = app.config
        return cls(app.extensions["db"], clock=config["CLOCK"], config=config,
                   monitoring_seconds=config["PAYMENT_MONITORING_SECONDS"], **options)

    # --- the loops -------------------------------------------------------------------------------

    def run_once(self) -> bool:
        """One pass over every enabled network, each caught up to its head in a thread of its own
        (cron's `--once`). False when some network could not be read (logged)."""
        started = time.perf_counter()
        networks = self._networks()
        if networks is None:  # the exit status says so
            return False
        outcomes = {}  # network id -> its poll succeeded

        def poll(network_id):
            outcomes[network_id] = self._poll_logged(network_id)

        threads = [self._thread(network.id, poll) for network in networks]
        for thread in threads:
            thread.join()
        for network in networks:
            self._give_up(network.id)
        calls = sum((client.calls for client in self._clients.values()), Counter())
        log.info("watch: pass done in %.3f s, %d RPC calls (%s)", time.perf_counter() - started,
                 sum(calls.values()), ", ".join(f"{m} {n}" for m, n in sorted(calls.items())))
        return all(outcomes.get(network.id, False) for network in networks)

    def run(self):
        """Poll every enabled network every `poll_interval` seconds (a failing one after its
        backoff), each in its own thread, until stopped; returns once every thread has ended."""
        log.info("watch: started, polling every %.1f s", self.poll_interval)
        try:
            self._loop()
        finally:
            self.stop()  # the threads end after their polls
            for thread in self._pollers.values():
                thread.join()
        log.info("watch: stopped")

    def _loop(self):
        """The main thread: the enabled networks read every `poll_interval`, a thread started for
        each one without a live thread (a network added, or its thread ended)."""
        failures = 0  # consecutive failed reads of the network list
        while not self.stopping:
            networks = self._networks(retry_in=self._backoff(failures + 1))
            if networks is None:  # wait, as for a failing node; the threads go on meanwhile
                failures += 1
                self._wake.wait(self._backoff(failures))
                continue
            failures = 0
            self._enabled = {network.id for network in networks}
            for network in networks:
                thread = self._pollers.get(network.id)
                if thread is None or not thread.is_alive():
                    self._pollers[network.id] = self._thread(network.id, self._poll_loop)
            self._wake.wait(self.poll_interval)

    def _poll_loop(self, network_id):
        """A network's thread: its polls, every `poll_interval` (after its backoff when failing),
        while it is enabled and the watcher is not stopping."""
        while not self.stopping and network_id in self._enabled:
            if self._next_poll.get(network_id, 0) <= time.monotonic():
                self._poll_logged(network_id)
            wait = self._next_poll[network_id] - time.monotonic()
            self._wake.wait(max(0.0, min(wait, self.poll_interval)))
        self._give_up(network_id)

    def _thread(self, network_id, target):
        thread = threading.Thread(target=target, args=(network_id,), name=f"watch {network_id}",
                                  daemon=True)
        thread.start()
        return thread

    def _networks(self, retry_in=None):
        """The enabled networks, or None when the database cannot be read (logged on one line)."""
        try:
            networks = payment_rows.enabled_networks(self.db.connection())
            return [n for n in networks if self.only is None or n.id in self.only]
        except Exception as e:
            then = "" if retry_in is None else f"; retry in {retry_in:.1f}s"
            log.warning("watch: cannot read the networks (%s)%s", _summary(e), then)
            return None

    def _poll_logged(self, network_id) -> bool:
        """A poll in a network's thread, its fault logged and backed off; the thread's database
        connection let go after it (a pool's connection is not held between polls). A network
        another watcher holds is not polled: tried again after `poll_interval` (True)."""
        started = time.monotonic()  # polls start every poll_interval, however long each takes
        try:
            if not self._hold(network_id):
                self._next_poll[network_id] = started + self.poll_interval
                return True
            self._poll_rereading(network_id)
        except LeaseLost:
            self._lost(network_id)
            self._next_poll[network_id] = started + self.poll_interval
            return True
        except Exception as e:  # the loop never dies: RPC faults, a locked database, a bug
            self._mark_failed(network_id)
            self._failures[network_id] += 1
            self._watched_set(network_id).forget()
            delay = self._backoff(self._failures[network_id])
            self._next_poll[network_id] = time.monotonic() + delay
            if isinstance(e, RpcError):  # its message names the URL's host only
                report = log.error if isinstance(e, WrongChain) else log.warning  # the operator's
                report("watch %s: %s; retry in %.1fs", network_id, e, delay)
            else:
                log.exception("watch %s: %s; retry in %.1fs", network_id, type(e).__name__, delay)
            return False
        finally:
            self._release(network_id)
        self._failures.pop(network_id, None)
        self._next_poll[network_id] = started + self.poll_interval
        return True

    def _poll_rereading(self, network_id):
        """A poll, read again at once when the chain moved under it (a block it read was replaced,
        or the pool's nodes disagreed about one): a reorganisation in the middle of a read is
        ordinary on a live chain and is not worth the backoff. Nothing of the moved read was
        recorded; a second move in a row is the poll's fault."""
        try:
            self.poll_network(network_id)
        except ChainMoved as e:
            if self.stopping:  # SIGTERM/SIGINT: no other poll starts
                raise
            log.info("watch %s: %s; reading again", network_id, e)
            self._watched_set(network_id).forget()
            self.poll_network(network_id)

    def _hold(self, network_id) -> bool:
        """The network's lease taken or renewed for this process; a change logged once."""
        lease = self._leases.get(network_id)
        if lease is None:
            lease = self._leases[network_id] = Lease(self.db, network_id, self.owner,
                                                     self.lease_seconds)
        held, before = lease.take(), self._holding.get(network_id)
        self._holding[network_id] = held
        if held and not before:
            self._watched_set(network_id).forget()  # another watcher may have moved it meanwhile
            log.info("watch %s: polling it (lease %s, %.0f s)", network_id, self.owner,
                     self.lease_seconds)
        elif not held and before is not False:
            self._watched_set(network_id).forget()
            holder = lease.holder()
            log.info("watch %s: not needed: watcher %s polls this network; standing by, ready to"
                     " take over", network_id, holder[0] if holder else "(another)")
        return held

    def _lost(self, network_id):
        """A transaction of this poll found another watcher holding the lease: nothing of it was
        written; this process stands by from now on."""
        self._holding[network_id] = False
        self._watched_set(network_id).forget()
        holder = self._leases[network_id].holder() if network_id in self._leases else None
        log.warning("watch %s: watcher %s took this network over; nothing more written here,"
                    " standing by", network_id, holder[0] if holder else "(another)")

    def _give_up(self, network_id):
        """The lease released when this process stops watching the network (a standby takes it
        at its next poll); already lost, or the database gone: it simply expires."""
        lease = self._leases.get(network_id)
        if lease is None or not self._holding.get(network_id):
            return
        self._holding[network_id] = None
        try:
            lease.release()
        except Exception as e:
            log.debug("watch %s: could not release the lease (%s)", network_id, _summary(e))
        finally:
            self._release(network_id)

    def _db(self, network_id):
        """The database as this network's poll writes to it: fenced by its lease when held."""
        if self._holding.get(network_id):
            return Fenced(self.db, self._leases[network_id])
        return self.db

    def _backoff(self, failures):
        """Seconds to wait after `failures` consecutive failures: doubling, up to backoff_max."""
        return doubling(failures, self.backoff_base, self.backoff_max)

    def _release(self, network_id):
        try:
            self.db.release()
        except Exception as e:  # the database may be what failed: the poll's log says so
            log.debug("watch %s: could not let the connection go (%s)", network_id, _summary(e))

    def stop(self):
        """SIGTERM/SIGINT: a flag; each network's thread ends after the step under way."""
        self.stopping = True
        self._wake.set()

    def close(self):
        for client in list(self._clients.values()):
            client.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one network -----------------------------------------------------------------------------

    def _client(self, network):
        """The network's client of its URL (each network its own, even on one URL)."""
        key = (network.id, network.rpc_url)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = Client.from_config(network.rpc_url, self.config)
        return client

    def _watched_set(self, network_id):
        """The network's watched addresses (its mode's), kept between its polls."""
        watched = self._watched.get(network_id)
        if watched is None:
            watched = self._watched[network_id] = WatchedSets()
        return watched

    def poll_network(self, network_id):
        """One poll (the package docstring's steps 0-5) of one network; RpcError on a fault,
        LeaseLost when another watcher took the network over (nothing of it written)."""
        db = self._db(network_id)
        network = payment_rows.get_network(db.connection(), network_id)
        if network is None:
            return
        client = self._client(network)
        kept = transfer_rows.newest_block(db.connection(), network.id, network.scanned_block)
        feeds, feed_calls = rates.feed_calls(db.connection(), network.id)
        reads = first_reads(client, network, kept, feed_calls)
        head = reads.head.number
        if head < network.head_block:
            raise RpcError(f"{redacted(network.rpc_url)} reports head {head}, below"
                           f" {network.head_block} already seen (a lagging node?)")
        if reorg.check(db, client, network, head, reads, int(self.clock())):
            self._watched_set(network.id).forget()
        if feeds:  # from a node on the kept chain and not behind it; a confirm reads the database
            rates.record_reads(db, network.id, feeds, reads.feeds, int(self.clock()))
        network = self._scan(client, network, head, reads)
        if confirm.confirm(db, client, network, head, reads, int(self.clock()),
                           self._described):
            self._watched_set(network.id).forget()
        refunds.settle(db, client, network, head, deep_enough(network, head, reads),
                       int(self.clock()), max_range=self.max_range,
                       max_addresses=self.max_addresses)
        collection_records.settle_watched(db, client, network, head,  # read-only, no key
                                          deep_enough(network, head, reads), int(self.clock()))
        self._mark_ok(network, reads)

    def _scan(self, client, network, head, reads):
        """Scan steps of at most `max_range` blocks up to the head, each read from the node whole
        (window.read_window) then recorded in one transaction (record.record_step). Returns the
        network's row as the last step left it."""
        db = self._db(network.id)
        watched = None
        while not self.stopping:
            network = payment_rows.get_network(db.connection(), network.id)
            if network.scanned_block >= head:
                break
            if watched is None:  # once a poll, and only when there are blocks to scan: an address
                # handed out after this read is paid in a block after `head` (read before it),
                # which the next poll scans
                watched = self._watched_set(network.id).view(db.connection(), network,
                                                             int(self.clock()))
            first = network.scanned_block + 1
            last = min(head, first + self.max_range - 1)
            previous = transfer_rows.newest_block(db.connection(), network.id,
                                                  network.scanned_block)
            pins = step_pins(network, head, first, last, reads, previous)
            window = read_window(client, network, first, last, watched, pins,
                                 max_addresses=self.max_addresses, busy=self._busy)
            reads.lower_tag(window.tag)
            self._record(network, head, window, reads)
        return network

    def _record(self, network, head, window, reads):
        """The step's transaction; its transfers logged; the blocks it proved noted in `reads`."""
        db = self._db(network.id)
        now = int(self.clock())
        try:
            paying, strays, outcomes = record_step(
                db, network, head, window, deep_enough(network, head, reads), now,
                now - self.monitoring_seconds)
        except LostRace:
            log.info("watch %s: another watcher read blocks %d-%d first", network.id,
                     window.first, window.last)
            return
        reads.proven.update((n, h.hash) for n, h in window.headers.items() if h is not None)
        if paying or strays:
            settled = f"; settled {outcomes_text(outcomes)}" if outcomes else ""
            other = f", {strays} unexpected" if strays else ""
            log.info("watch %s: blocks %d-%d: %d transfers%s%s", network.id, window.first,
                     window.last, paying, other, settled)

    def _mark_ok(self, network, reads):
        """The poll succeeded: the network's health, in the database (app/domain/health.py)."""
        now = int(self.clock())
        tag_block = reads.tag.number if reads.tag is not None and reads.tag_asked_again else None
        after = replace(network, polled_at=now, failing_since=None,
                        head_timestamp=reads.head.timestamp)
        recovered = health.recovered_at(network, after, now, self.stale_seconds)
        db = self._db(network.id)
        with db.transaction() as conn:
            payment_rows.poll_succeeded(conn, network.id, now, reads.head.timestamp, tag_block,
                                        recovered)
        if recovered is not None and network.polled_at is not None:
            log.warning("watch %s: available again", network.id)

    def _mark_failed(self, network_id):
        """The poll failed: kept in the database, so cron's runs and a loop agree (not when
        another watcher holds the network: its polls say how it goes)."""
        if not self._holding.get(network_id):
            return
        db = self._db(network_id)
        try:
            with db.transaction() as conn:
                payment_rows.poll_failed(conn, network_id, int(self.clock()))
        except Exception as e:  # the database may be what failed: the log says so already
            log.debug("watch %s: could not record the failed poll (%s)", network_id, _summary(e))
