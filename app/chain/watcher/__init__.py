"""The chain watcher: finds token transfers to deposit addresses, counts their confirmations, and
writes the payment events (`flask --app app watch-payments`, app/cli/watcher.py).

One poll of a network (`poll_network`), every RPC call bounded by the client's timeouts. A
provider's URL is a pool of nodes, each call may reach another one (lagging, on an abandoned fork,
of another chain): nothing is recorded on one answer alone. What a step records is proven by
batches that carry its pins (rpc.Pins), answered whole by one node; docs/payments.md, "What a poll
reads", says what each check defends against.
  0-2. first batch, one node: `eth_chainId` (another chain's node ends the poll as a fault, both
     ids logged, nothing of the answer looked at), the head's block (`latest`; below the head
     already seen, a lagging node, the poll is a fault), the newest kept block (`chain_blocks`)
     and, under a finality mode, the node's `safe` or `finalized` block (none: a fault, never a
     fallback to counting). A kept hash that differs is a reorganisation: every kept block is
     asked again of one node that also has the head's block, the highest it still has is the
     fork (none: the start block), unconfirmed transfers above it are `orphaned` (no event),
     confirmed ones whose block is gone on that chain `reversed` (with `payment.reversed`; an
     ERROR when that reaches below the tag's block), and the scan position goes back.
  3. scan, in steps of at most `max_range` blocks up to the head. The watched addresses are kept
     in memory between polls (read whole after a start, a rewind or a failure and every
     FULL_READ_SECONDS; else only the payments made or changed since). Each eth_getLogs call
     (one for the tokens, filtered here, or by chunks of `max_addresses` addresses) is sent in a
     batch with the pins: the step's last block (the head's hash from the first batch, or the
     hash the first answer gives, which every later batch must repeat), the previous step's last
     block under its kept hash (or, without one, the chain id), the head's block, the tag's block
     when the step may reach it. Logs must be well-formed Transfers, none `removed`; the headers of the blocks holding
     the payments are read with the pins again and each log's block hash must be its block's.
     Any mismatch is a fault, nothing of the step recorded. A transfer of value 0 is no payment.
     One transaction a step: the head, the new transfers (`seen`, with `payment.pending`), the
     last block's hash, the scan position by compare-and-set (a watcher that lost the race rolls
     back). Transfers already deep enough that complete their process are recorded `confirmed`
     and settled there (`payment.completed`): a catch-up writes each transfer once. Any other deep
     transfer waits, `seen`, for step 4.
  4. confirm: `seen` transfers with `confirmations` blocks (or at or below the tag's block) become
     `confirmed` when one node that has the newest kept block under its hash, the head's block
     (and the tag's under its hash) has theirs under their hash (a block this poll's steps
     proved is not asked again),
     each process with `payment.completed`, `payment.partial` or `payment.received_late` (final
     already, or after its expiry), CONFIRM_BATCH a commit. A transfer whose block that node does
     not have is orphaned, and reading goes back to the highest kept hash below it.
  5. refunds: the merchants' transfers that pay pending refunds (app/chain/refunds.py).

Faults (unreachable node, timeouts, HTTP errors, malformed answers) end the poll of that network
only: logged with the URL's host alone, retried after a backoff doubling up to `backoff_max`. Each
poll's outcome is written to the network's row (app/chain/health.py reads it).
Nothing half-done is committed. SIGTERM/SIGINT: the current step commits, the command exits 0.
"""
import logging
import threading
import time
from collections import Counter, defaultdict
from dataclasses import replace

from app.chain import health, refunds, tokens
from app.chain.canonical import KEEP_BLOCKS, kept_floor
from app.chain.rpc import (TAGS, ChainMoved, Client, Malformed, Pins, RpcError, WrongChain,
                           is_too_large, parse_header, quantity, redacted, wrong_chain)
from app.config import DEFAULTS
from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import refunds as refund_rows
from app.data import transfers as transfer_rows
from app.data import unexpected as unexpected_rows
from app.data.transfers import PAYING, UNEXPECTED
from app.outbox import emit
from app.records import PaymentView, Transfer

log = logging.getLogger(__name__)

MAX_RANGE = 2_000  # blocks per eth_getLogs: providers refuse wider ranges (often 2k–10k)
MAX_ADDRESSES = 500  # deposit addresses per eth_getLogs (topic OR-list)
CONFIRM_BATCH = 200  # processes settled per transaction (each with its event)
LOCAL_FILTER_MAX = 10_000  # a range's token logs filtered here; more: ask by address chunks
FULL_READ_SECONDS = 600  # the watched set is read whole this often; in between, what was added
CLOCK_MARGIN = 60  # seconds a payment's transaction may take between its clock and its commit


def _summary(error) -> str:
    """An exception in one log line: its class and the first line of its message (PostgreSQL's
    go on with the statement's text)."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}"


class _LostRace(Exception):
    """Another watcher moved the scan position during this step: roll back, read it again."""


class Watcher:
    def __init__(self, db, *, clock, monitoring_seconds=86_400, poll_interval=5.0,
                 max_range=MAX_RANGE, max_addresses=MAX_ADDRESSES, backoff_base=1.0,
                 backoff_max=60.0, config=DEFAULTS, networks=None):
        self.db, self.clock = db, clock
        self.monitoring_seconds = monitoring_seconds
        self.poll_interval, self.max_range, self.max_addresses = poll_interval, max_range, max_addresses
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.config = config  # the CHAIN_RPC_* timeouts, NETWORK_STALE_SECONDS
        self.stale_seconds = int(config.get("NETWORK_STALE_SECONDS", 60))
        self.only = set(networks) if networks else None  # network ids to watch (None: every one)
        self.stopping = False
        self._wake = threading.Event()
        self._clients = {}
        self._failures = defaultdict(int)  # network id -> consecutive failed polls
        self._next_poll = {}  # network id -> time.monotonic() of its next poll
        self._busy = set()  # networks whose token logs are too many to filter here
        self._watched = {}  # is_test -> _Watched of that mode's networks: kept between polls
        self._described = {}  # (chain id, contract) -> (symbol, decimals) its contract answered

    @classmethod
    def from_app(cls, app, **options):
        config = app.config
        return cls(app.extensions["db"], clock=config["CLOCK"],
                   monitoring_seconds=config["PAYMENT_MONITORING_SECONDS"], config=config, **options)

    # --- the loops -------------------------------------------------------------------------------

    def run_once(self) -> bool:
        """One pass over every enabled network, each caught up to its head (cron's `--once`).
        False when some network could not be read (logged)."""
        ok, started = True, time.perf_counter()
        networks = self._networks()
        if networks is None:  # the exit status says so
            return False
        for network in networks:
            if self.stopping:
                break
            ok = self._poll_logged(network.id) and ok
        calls = sum((client.calls for client in self._clients.values()), Counter())
        log.info("watch: pass done in %.3f s, %d RPC calls (%s)", time.perf_counter() - started,
                 sum(calls.values()), ", ".join(f"{m} {n}" for m, n in sorted(calls.items())))
        return ok

    def run(self):
        """Poll every enabled network every `poll_interval` seconds (a failing one after its
        backoff) until stopped."""
        log.info("watch: started, polling every %.1f s", self.poll_interval)
        self._loop()
        log.info("watch: stopped")

    def _loop(self):
        failures = 0  # consecutive failed reads of the network list
        while not self.stopping:
            now = time.monotonic()
            networks = self._networks(retry_in=self._backoff(failures + 1))
            if networks is None:  # wait, as for a failing node
                failures += 1
                self._wake.wait(self._backoff(failures))
                continue
            failures = 0
            for network in networks:
                if self.stopping:
                    break
                if self._next_poll.get(network.id, 0) <= now:
                    self._poll_logged(network.id)
            due = [t for t in self._next_poll.values()]
            wait = max(0.0, min(due, default=now + self.poll_interval) - time.monotonic())
            self._wake.wait(min(wait, self.poll_interval))

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
        started = time.monotonic()  # polls start every poll_interval, however long each takes
        try:
            self.poll_network(network_id)
        except Exception as e:  # the loop never dies: RPC faults, a locked database, a bug
            self._mark_failed(network_id)
            self._failures[network_id] += 1
            self._forget_watched()
            delay = self._backoff(self._failures[network_id])
            self._next_poll[network_id] = time.monotonic() + delay
            if isinstance(e, RpcError):  # its message names the URL's host only
                report = log.error if isinstance(e, WrongChain) else log.warning  # the operator's
                report("watch %s: %s; retry in %.1fs", network_id, e, delay)
            else:
                log.exception("watch %s: %s; retry in %.1fs", network_id, type(e).__name__, delay)
            return False
        self._failures.pop(network_id, None)
        self._next_poll[network_id] = started + self.poll_interval
        return True

    def _backoff(self, failures):
        """Seconds to wait after `failures` consecutive failures: doubling, up to backoff_max."""
        return min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))

    def stop(self):
        self.stopping = True
        self._wake.set()

    def close(self):
        for client in self._clients.values():
            client.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one network -----------------------------------------------------------------------------

    def _client(self, network):
        client = self._clients.get(network.rpc_url)
        if client is None:
            client = self._clients[network.rpc_url] = Client.from_config(network.rpc_url, self.config)
        return client

    def poll_network(self, network_id):
        """Steps 0-4 of the module docstring for one network; RpcError on a fault."""
        network = payment_rows.get_network(self.db.connection(), network_id)
        if network is None:
            return
        client = self._client(network)
        reads = self._first_reads(client, network)
        head = reads.head.number
        if head < network.head_block:
            raise RpcError(f"{redacted(network.rpc_url)} reports head {head}, below {network.head_block}"
                           " already seen (a lagging node?)")
        self._check_reorg(client, network, head, reads)
        watched = None
        while not self.stopping:
            network = payment_rows.get_network(self.db.connection(), network_id)
            if network.scanned_block >= head:
                break
            if watched is None:  # once a poll, and only when there are blocks to scan: an address
                # handed out after this read is paid in a block after `head` (read before it),
                # which the next poll scans
                watched = self._watched_set(network)
            self._scan_step(client, network, head, watched, reads)
        self._confirm(client, network, head, reads)
        refunds.settle(self.db, client, network, head, self._deep_enough(network, head, reads),
                       int(self.clock()), max_range=self.max_range, max_addresses=self.max_addresses)
        self._mark_ok(network, reads)

    def _first_reads(self, client, network) -> "_Reads":
        """One batch, so one node: the chain id, the head's block, the newest kept block (its hash
        is compared with the kept one) and, under a finality mode, the node's block of that tag
        (which must exist: a node that stops serving it fails the poll, never a fallback)."""
        kept = transfer_rows.newest_block(self.db.connection(), network.id, network.scanned_block)
        calls = [("eth_chainId", []), ("eth_getBlockByNumber", ["latest", False])]
        if kept is not None:
            calls.append(("eth_getBlockByNumber", [hex(kept.number), False]))
        if network.finality in TAGS:
            calls.append(("eth_getBlockByNumber", [network.finality, False]))
        results = client.batch(calls, what='eth_getBlockByNumber("latest")')
        reported = quantity(results[0], "eth_chainId")
        if reported != network.chain_id:
            raise wrong_chain(network.rpc_url, reported, network.chain_id)
        head = parse_header(results[1], "eth_getBlockByNumber")
        if head is None:
            raise RpcError(f"{redacted(network.rpc_url)} has no latest block")
        reads = _Reads(head, kept)
        if kept is not None:
            reads.kept_header = parse_header(results[2], "eth_getBlockByNumber")
        if network.finality in TAGS:
            tag = parse_header(results[-1], f"eth_getBlockByNumber(\"{network.finality}\")")
            if tag is None:
                raise RpcError(f"{redacted(network.rpc_url)} has no \"{network.finality}\" block:"
                               f" network {network.id} settles by it")
            if tag.number > head.number:
                raise Malformed(f"the \"{network.finality}\" block is above the head")
            reads.tag = tag
        return reads

    def _mark_ok(self, network, reads):
        """The poll succeeded: the network's health, in the database (app/chain/health.py)."""
        now = int(self.clock())
        tag_block = reads.tag.number if reads.tag is not None else None
        after = replace(network, polled_at=now, failing_since=None,
                        head_timestamp=reads.head.timestamp)
        recovered = health.recovered_at(network, after, now, self.stale_seconds)
        with self.db.transaction() as conn:
            payment_rows.poll_succeeded(conn, network.id, now, reads.head.timestamp, tag_block,
                                        recovered)
        if recovered is not None and network.polled_at is not None:
            log.warning("watch %s: available again", network.id)

    def _mark_failed(self, network_id):
        """The poll failed: kept in the database, so cron's runs and a loop agree."""
        try:
            with self.db.transaction() as conn:
                payment_rows.poll_failed(conn, network_id, int(self.clock()))
        except Exception as e:  # the database may be what failed: the log says so already
            log.debug("watch %s: could not record the failed poll (%s)", network_id, _summary(e))

    def _deep_enough(self, network, head, reads) -> int:
        """The highest block whose transfers count: the head less the confirmations, or the
        finality tag's block (none after a reorganisation in this poll: the tag was read from the
        chain before it)."""
        if network.finality not in TAGS:
            return head - network.confirmations + 1
        return reads.tag.number if reads.tag is not None else -1

    def _check_reorg(self, client, network, head, reads):
        kept = reads.kept
        if kept is None:
            return
        header = reads.kept_header  # read with the head, in the first batch
        if header is not None and header.hash == kept.hash:
            return
        reads.tag = None  # from a node without the kept chain: nothing counts by it this poll
        kept = transfer_rows.blocks_from_top(self.db.connection(), network.id,
                                             min(network.scanned_block, head))
        # Replaced, or not on the node that answered (a lagging one, one on another fork): one
        # node that has the head answers for every kept block at once, in one batch.
        pins = Pins(network.chain_id, {head: None})
        found = client.headers([block.number for block in kept], pins=pins)
        fork = next((block.number for block in kept if found[block.number] is not None
                     and found[block.number].hash == block.hash), None)
        if fork == kept[0].number:
            return
        log.warning("watch %s: block %d was replaced: reorganisation", network.id, kept[0].number)
        if fork is None:
            fork = self._below_every_kept_hash(network, kept)
        else:  # the transfers' blocks are asked of a node on the same chain as the fork's
            pins = Pins(None, {head: pins.headers[head].hash, fork: found[fork].hash})
        gone = self._left_the_chain(client, network, fork, pins)
        now = int(self.clock())
        with self.db.transaction() as conn:
            transfer_rows.set_head(conn, network.id, head)
            reversed_ = [t for table, t in gone if table == PAYING and transfer_rows.reverse(conn, t)]
            for table, t in gone:  # an unexpected one had counted only if accepted as payment
                if table == UNEXPECTED:
                    accepted = unexpected_rows.get(conn, t.process_id, t.tx_hash, t.log_index)
                    if (transfer_rows.reverse(conn, t, table=UNEXPECTED)
                            and accepted.accepted_at is not None):
                        reversed_.append(t)
            for transfer in reversed_:  # each event shows the process without that transfer
                emit(conn, "payment.reversed", process_rows.get(conn, transfer.process_id), now)
            orphaned = sum(transfer_rows.orphan_above(conn, network.id, fork, table=table)
                           for table in (PAYING, UNEXPECTED))
            transfer_rows.forget_blocks_above(conn, network.id, fork)
            transfer_rows.rewind(conn, network.id, fork)
        self._forget_watched()
        if network.finality in TAGS and network.tag_block is not None and fork < network.tag_block:
            # what the node called final (or safe) was replaced: the chain broke its promise
            log.error("watch %s: a reorganisation replaced blocks from %d, at or below the node's"
                      " \"%s\" block %d: %d confirmed transfers left the chain (payment.reversed)",
                      network.id, fork + 1, network.finality, network.tag_block, len(reversed_))
        elif reversed_:  # the operator's confirmation depth was too shallow for this chain
            log.error("watch %s: reorganisation deeper than %d confirmations: %d confirmed transfers"
                      " left the chain (payment.reversed)", network.id, network.confirmations,
                      len(reversed_))
        log.warning("watch %s: reading again from block %d; %d unconfirmed transfers orphaned",
                    network.id, fork + 1, orphaned)

    def _check_chain(self, client, network):
        reported = client.chain_id()
        if reported != network.chain_id:
            raise wrong_chain(network.rpc_url, reported, network.chain_id)

    def _left_the_chain(self, client, network, fork, pins):
        """(table, transfer) of the confirmed transfers (paying and unexpected) above `fork` whose
        block the node no longer has under their hash (kept hashes are sparse: a block above the
        fork may still be the node's), asked in
        batches carrying `pins` (the chain id, the head's block and the fork's): a node switched
        to another chain or fork under the poll reverses nothing."""
        conn = self.db.connection()
        counted = [(table, t) for table in (PAYING, UNEXPECTED)
                   for t in transfer_rows.confirmed_above(conn, network.id, fork, table=table)]
        if not counted:
            return []
        canonical = client.headers((t.block_number for _, t in counted), pins=pins)
        return [(table, t) for table, t in counted if canonical[t.block_number] is None
                or canonical[t.block_number].hash != t.block_hash]

    def _below_every_kept_hash(self, network, kept):
        """The fork point when every kept hash was replaced. A kept hash is a step's last block
        only, so the fork may lie anywhere below the lowest one, in blocks whose hashes were never
        kept: the watcher reads again from its start block (confirmed transfers are not counted
        twice, seen ones are revived). Slow only after a reorganisation this deep, or one in the
        watcher's first steps, where the start is near; never a missed transfer."""
        replaced = network.scanned_block - kept[-1].number + 1  # at least this many blocks
        report = log.error if replaced >= network.confirmations else log.warning
        report("watch %s: no kept block hash is on the chain any more (the reorganisation replaced"
               " at least %d blocks, confirmations are %d): reading again from the start block %d",
               network.id, replaced, network.confirmations, network.start_block)
        return network.start_block - 1

    def _scan_step(self, client, network, head, watched, reads):
        first = network.scanned_block + 1
        last = min(head, first + self.max_range - 1)
        now = int(self.clock())
        pins = self._pins(network, head, last, reads)
        logs, strays = self._paying(network, self._transfer_logs(client, network, first, last,
                                                                 watched, pins), watched, now)
        pins.read(client)  # when no eth_getLogs call carried them (nothing watched)
        tip = pins.headers[last]
        headers = self._proven(client, pins, logs + strays)
        # Built `confirmed` when deep enough (a catch-up's usual case), made `seen` below otherwise.
        deep_enough = self._deep_enough(network, head, reads)
        transfers = [Transfer(
            chain_id=network.chain_id, tx_hash=entry.tx_hash, log_index=entry.log_index,
            network_id=network.id, process_id=match.process_id, token_contract=entry.token,
            from_address=entry.from_address, amount=entry.amount,
            block_number=entry.block_number, block_hash=entry.block_hash,
            block_timestamp=headers[entry.block_number].timestamp,
            status="confirmed" if entry.block_number <= deep_enough else "seen", seen_at=now,
            confirmed_at=now if entry.block_number <= deep_enough else None,
        ) for entry, match in logs]
        unexpected = [Transfer(  # confirmed and reported by the confirm phase (_report_unexpected)
            chain_id=network.chain_id, tx_hash=entry.tx_hash, log_index=entry.log_index,
            network_id=network.id, process_id=process_id, token_contract=entry.token,
            from_address=entry.from_address, amount=entry.amount,
            block_number=entry.block_number, block_hash=entry.block_hash,
            block_timestamp=headers[entry.block_number].timestamp, status="seen", seen_at=now,
            confirmed_at=None,
        ) for entry, process_id in strays]
        try:
            with self.db.transaction() as conn:
                transfer_rows.set_head(conn, network.id, head)  # before the events show it
                completing = self._completing(conn, transfers, deep_enough)
                confirmed = defaultdict(list)
                for transfer in transfers:
                    deep = transfer.block_number <= deep_enough
                    if deep and transfer.process_id not in completing:
                        transfer = replace(transfer, status="seen", confirmed_at=None)
                    recorded = transfer_rows.record(conn, transfer)
                    if recorded and transfer.status == "confirmed":
                        confirmed[transfer.process_id].append(transfer)
                    elif recorded == "new" and not deep:
                        emit(conn, "payment.pending", process_rows.get(conn, transfer.process_id),
                             now)
                outcomes = self._settle_all(conn, confirmed, now, read=completing)
                for transfer in unexpected:
                    transfer_rows.record(conn, transfer, table=UNEXPECTED)
                transfer_rows.save_block(conn, network.id, tip.number, tip.hash, tip.parent_hash,
                                         tip.timestamp)
                transfer_rows.prune_blocks(conn, network.id, kept_floor(
                    head, network.confirmations, deep_enough), KEEP_BLOCKS)
                if not transfer_rows.advance(conn, network.id, network.scanned_block, last):
                    raise _LostRace()
        except _LostRace:
            log.info("watch %s: another watcher read blocks %d-%d first", network.id, first, last)
            return
        reads.proven.update((n, h.hash) for n, h in headers.items() if h is not None)
        if logs or strays:
            settled = f"; settled {_outcomes(outcomes)}" if outcomes else ""
            other = f", {len(strays)} unexpected" if strays else ""
            log.info("watch %s: blocks %d-%d: %d transfers%s%s", network.id, first, last, len(logs),
                     other, settled)

    def _pins(self, network, head, last, reads):
        """What every batch of a step must agree on (rpc.Pins): the step's last block (`last`:
        under the hash of the first read of the poll when it is the head, else of the step's first
        answer), the previous step's last block under its kept hash (the new blocks extend the kept
        chain; without one, the chain id names the chain), the head's block (the chain that
        answers is as long as the head the depths are counted from), and under a finality mode
        the tag's block when the step may hold blocks at or below it (what counts by it is of its
        chain)."""
        blocks = {last: reads.head.hash if last == head else None}
        previous = transfer_rows.newest_block(self.db.connection(), network.id,
                                              network.scanned_block)
        kept = previous is not None and previous.number == network.scanned_block
        if kept:
            blocks[previous.number] = previous.hash
        blocks.setdefault(head, None)
        tag = reads.tag
        if tag is not None and tag.number > network.scanned_block:
            if blocks.get(tag.number, tag.hash) not in (None, tag.hash):
                raise ChainMoved(f"block {tag.number} is both {blocks[tag.number]} and the tag's"
                                 f" {tag.hash}")
            blocks[tag.number] = tag.hash
        return Pins(None if kept else network.chain_id, blocks)

    def _paying(self, network, entries, watched, now):
        """(paying, unexpected): (log, watched address) of the logs that pay a watched process (its
        token on this network, to its address), and (log, process id) of the other transfers to a
        watched address (another token, or a payment chosen on another network); each of a value
        above 0 (a transfer of 0 is no payment: no record, no event)."""
        paying, unexpected = [], []
        for entry in entries:
            if entry.amount == 0:
                continue
            match = watched.by_key.get((entry.token, entry.to_address))
            if match is not None:
                paying.append((entry, match))
                continue
            process_id = watched.deposits.get(entry.to_address)
            if process_id is not None:
                unexpected.append((entry, process_id))
        if paying or unexpected:  # a process final for longer than the monitoring period: not
            # watched any more
            ids = {m.process_id for _, m in paying} | {pid for _, pid in unexpected}
            gone = transfer_rows.final_before(self.db.connection(), ids,
                                              now - self.monitoring_seconds)
            paying = [(entry, match) for entry, match in paying if match.process_id not in gone]
            unexpected = [(entry, pid) for entry, pid in unexpected if pid not in gone]
        return paying, unexpected

    def _proven(self, client, pins, logs):
        """{block number: header} of the blocks holding `logs`, read in batches carrying the step's
        pins, and every log's block hash equal to its block's header: else ChainMoved (a log from a
        node on another fork or chain, or the chain moved), nothing of the step recorded."""
        headers = client.headers({entry.block_number for entry, _ in logs}, pins=pins)
        for entry, _ in logs:
            header = headers[entry.block_number]
            if header is None or header.hash != entry.block_hash:
                raise ChainMoved(f"a log's block {entry.block_number} {entry.block_hash} is not"
                                 " that of the step's chain")
        return headers

    def _watched_set(self, network):
        """The watched addresses of the network's mode (on every network: a transfer on another
        one than the payment's is unexpected), shared by the mode's networks: read whole after a
        start, a rewind or a failed poll, and every FULL_READ_SECONDS, else the kept set with the
        payments made or changed since the last read (CLOCK_MARGIN earlier). A kept process that
        became final long ago is left out when one of its transfers is found (final_before), not
        by reading the whole set. The network's view of it: `watched.view(network)`."""
        now, conn = int(self.clock()), self.db.connection()
        kept = self._watched.get(network.is_test)
        if (kept is None or now < kept.read_at
                or time.monotonic() > kept.full_at + FULL_READ_SECONDS):
            rows = transfer_rows.watched_addresses(conn, now - self.monitoring_seconds,
                                                   livemode=not network.is_test)
            kept = self._watched[network.is_test] = _Watched(rows, now)
        else:  # after this network's head was read: what was handed out since is paid above it
            kept.add(transfer_rows.watched_since(conn, kept.read_at - CLOCK_MARGIN,
                                                 livemode=not network.is_test), now)
        registered = {a.contract.lower() for a in payment_rows.list_assets(conn)
                      if a.network_id == network.id}
        return kept.view(network.id, registered)

    def _forget_watched(self):
        """The next poll reads the watched addresses whole (after a rewind or a failure)."""
        self._watched.clear()

    def _transfer_logs(self, client, network, first, last, watched, pins):
        """The Transfer logs of any contract in the range to a watched address, each eth_getLogs
        call in a batch with the step's pins (so the node that gives the logs holds the step's
        blocks: its logs are all of them). When the addresses take more than one call, one call for
        every Transfer in the range, filtered here, is tried first; a chain busy enough that the
        node refuses it, or that returns more than LOCAL_FILTER_MAX logs, is asked by address
        chunks from then on (several calls to a batch). A malformed log is a fault when its
        contract is a registered asset of the network, and left out otherwise (anyone can deploy
        a contract that emits garbage to a deposit address)."""
        if not watched.deposits:
            return []
        strict = watched.registered
        if len(watched.deposits) > self.max_addresses and network.id not in self._busy:
            try:
                logs = client.transfer_logs(first, last, None, None, split=False, pins=pins,
                                            strict=strict)
            except RpcError as e:
                if not is_too_large(e):
                    raise
                logs = None
            if logs is None or len(logs) > LOCAL_FILTER_MAX:
                log.info("watch %s: busy chain: reading by deposit address", network.id)
                self._busy.add(network.id)
            if logs is not None:
                return logs
        recipients = watched.recipients
        chunks = [recipients[i:i + self.max_addresses]
                  for i in range(0, len(recipients), self.max_addresses)]
        return client.transfer_logs_by_chunks(first, last, chunks, pins=pins, strict=strict)

    def _confirm(self, client, network, head, reads):
        deep_enough = self._deep_enough(network, head, reads)
        conn = self.db.connection()
        due = transfer_rows.seen_up_to(conn, network.id, deep_enough)
        strays = transfer_rows.seen_up_to(conn, network.id, deep_enough, table=UNEXPECTED)
        if not due and not strays:
            return
        # A block proven by this poll's steps is of the chain through the newest kept block, the
        # head (and the tag): read again only the others.
        canonical = dict(reads.proven)
        unread = {t.block_number for t in due + strays} - set(canonical)
        if unread:
            found = client.headers(unread, pins=self._confirm_pins(network, head, reads))
            canonical.update((n, h.hash if h is not None else None) for n, h in found.items())
        replaced = {t.block_number: t.block_hash for t in due + strays
                    if canonical[t.block_number] != t.block_hash}
        for number, block_hash in sorted(replaced.items()):
            # Not on the kept chain (a transfer recorded without proof by an earlier release). The
            # blocks below it may have gone too: read again from the highest kept hash below it,
            # which the next poll checks (walking down when it is gone as well).
            with self.db.transaction() as conn:
                for table in (PAYING, UNEXPECTED):
                    transfer_rows.orphan_block(conn, network.id, number, block_hash, table=table)
                transfer_rows.forget_blocks_above(conn, network.id, number - 1)
                below = transfer_rows.blocks_from_top(conn, network.id, number)
                transfer_rows.rewind(conn, network.id, below[0].number if below
                                     else network.start_block - 1)
            self._forget_watched()
            log.warning("watch %s: block %d was replaced: transfer orphaned", network.id, number)
        by_process = defaultdict(list)
        for transfer in due:
            if transfer.block_number not in replaced:
                by_process[transfer.process_id].append(transfer)
        now = int(self.clock())
        pending, outcomes = list(by_process.items()), Counter()
        for i in range(0, len(pending), CONFIRM_BATCH):  # one commit (one sync) per batch
            with self.db.transaction() as conn:
                transfer_rows.set_head(conn, network.id, head)  # before the events show it
                confirmed = {}
                for process_id, transfers in pending[i:i + CONFIRM_BATCH]:
                    done = [t for t in transfers if transfer_rows.confirm(conn, t, now)]
                    if done:
                        confirmed[process_id] = done
                outcomes += self._settle_all(conn, confirmed, now)
        if outcomes:  # one line per poll; each process's event is in the outbox
            log.info("watch %s: transfers confirmed %s", network.id, _outcomes(outcomes))
        self._report_unexpected(client, network, head, [t for t in strays
                                                        if t.block_number not in replaced])

    def _report_unexpected(self, client, network, head, strays):
        """Confirm the unexpected transfers deep enough and proven (the caller's), each with what
        its contract says of itself (`_describe`) and its one `payment.unexpected`. Never credited:
        the process keeps its state."""
        if not strays:
            return
        described = self._describe(client, network, {t.token_contract for t in strays})
        now, reported = int(self.clock()), 0
        for i in range(0, len(strays), CONFIRM_BATCH):
            with self.db.transaction() as conn:
                transfer_rows.set_head(conn, network.id, head)
                for t in strays[i:i + CONFIRM_BATCH]:
                    if not transfer_rows.confirm(conn, t, now, table=UNEXPECTED):
                        continue
                    unexpected_rows.describe(conn, t, *described[t.token_contract])
                    if unexpected_rows.report(conn, t, now):
                        emit(conn, "payment.unexpected", process_rows.get(conn, t.process_id), now)
                        reported += 1
        if reported:
            log.info("watch %s: %d unexpected transfers reported (payment.unexpected)", network.id,
                     reported)

    def _describe(self, client, network, contracts) -> dict:
        """{contract: (symbol, decimals)}: a registered asset of the network from its row, another
        contract from what it answers (app/chain/tokens.py, never a fault), asked once a watcher."""
        assets = {a.contract.lower(): (a.symbol, a.decimals)
                  for a in payment_rows.list_assets(self.db.connection())
                  if a.network_id == network.id}
        found = {c: assets.get(c, self._described.get((network.chain_id, c))) for c in contracts}
        unknown = [c for c, known in found.items() if known is None]
        for contract, answer in tokens.describe(client, unknown).items():
            found[contract] = self._described[(network.chain_id, contract)] = answer
        return found

    def _settle_all(self, conn, confirmed, now, read=None) -> Counter:
        """Each process's event for `confirmed` ({process id: its transfers just confirmed}), in
        the caller's transaction; the events written, by type. `read`: {process id: (process,
        view)} read earlier in the transaction, before these transfers were recorded (the scan
        step's), else they are read now."""
        outcomes = Counter()
        if not confirmed:
            return outcomes
        if read is None:  # two queries for all the views: a settlement changes no other process
            processes = process_rows.get_many(conn, confirmed)
            views = payment_rows.views_of(conn, confirmed)
        else:  # the step's own transfers are the only change since (a concurrent watcher's step
            # would make this one's compare-and-set fail and roll it back)
            processes = {process_id: read[process_id][0] for process_id in confirmed}
            views = {process_id: _with(read[process_id][1], done)
                     for process_id, done in confirmed.items()}
        refunds = refund_rows.of_processes(conn, confirmed)  # for the events: one query
        for process_id, done in confirmed.items():
            outcomes[settle(conn, processes[process_id], views[process_id], done, now,
                            refunds.get(process_id, ()))] += 1
        return outcomes

    def _confirm_pins(self, network, head, reads):
        """The confirm phase's pins: the newest kept block under its kept hash (the chain every
        `seen` transfer was proven on; without one, the chain id), the head's block (that chain
        is as long as the head the depths are counted from), and under a finality mode the tag's
        block under its hash (the transfers' blocks are below it on its chain)."""
        blocks = {head: None}
        newest = transfer_rows.newest_block(self.db.connection(), network.id,
                                            network.scanned_block)
        if newest is not None:
            blocks[newest.number] = newest.hash
        if reads.tag is not None:
            if blocks.get(reads.tag.number, reads.tag.hash) not in (None, reads.tag.hash):
                raise ChainMoved(f"block {reads.tag.number} is not the tag's {reads.tag.hash}")
            blocks[reads.tag.number] = reads.tag.hash
        return Pins(None if newest is not None else network.chain_id, blocks)

    def _completing(self, conn, transfers, deep_enough) -> dict:
        """The processes that the step's transfers already deep enough complete (a watcher catching
        up): these are recorded `confirmed` and settled in the step's own transaction, as the
        confirm phase would settle them (the step's pins prove their blocks and depth). Any other
        outcome (partial, late), or a process with a transfer
        still `seen` from an earlier step, waits for the confirm phase at the end of the poll, which
        settles each process's deep transfers together: one event, the outcome only.
        {process id: (process, view)}, as read before the step records anything."""
        arriving = defaultdict(list)
        for t in transfers:
            if t.block_number <= deep_enough:
                arriving[t.process_id].append(t)
        if not arriving:
            return {}
        processes = process_rows.get_many(conn, arriving)
        views = payment_rows.views_of(conn, arriving)
        completing = {}
        for process_id, new in arriving.items():
            process, view = processes[process_id], views[process_id]
            known = {(t.chain_id, t.tx_hash, t.log_index) for t in view.transfers}
            new = [t for t in new if (t.chain_id, t.tx_hash, t.log_index) not in known]
            if (process.status == "pending" and _in_time(process, new)
                    and all(_on_choice(view.payment, t) for t in new)  # else: rescaled later
                    and all(t.status == "confirmed" for t in view.transfers)
                    and view.payment.covered_by(
                        _paid(_in_time(process, view.transfers + tuple(new))))):
                completing[process_id] = (process, view)
        return completing

class _Reads:
    """What a poll read first, in one batch (`_first_reads`), and the blocks its steps proved."""

    def __init__(self, head, kept):
        self.head = head  # the head's Header
        self.kept = kept  # the newest kept block (ChainBlock) at or below the scan position
        self.kept_header = None  # the node's header at the kept block's number
        self.tag = None  # the node's Header of the finality tag (None: counting, or not usable)
        self.proven = {}  # number -> hash of the blocks this poll's steps proved


class _Watched:
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

    def view(self, network_id, registered) -> "_NetworkView":
        return _NetworkView(self, self.by_network[network_id], registered)


class _NetworkView:
    """What one network's scan steps use: its payments' `by_key`, the mode's `deposits` and
    `recipients`, and `registered`, the network's asset contracts (lowercase: their logs are
    strict)."""

    def __init__(self, watched, by_key, registered):
        self.watched, self.by_key, self.registered = watched, by_key, registered
        self.deposits = watched.deposits

    @property
    def recipients(self):
        return self.watched.recipients


def settle(conn, process, view, confirmed, now, refunds=None):
    """The event for transfers just confirmed, or accepted as payment (app/unexpected.py), in the
    caller's transaction, and completion when paid; `process` and `view` as they are after them;
    `refunds` the process's (None: read here). Returns the event's type."""
    process_id = process.id
    if process.status != "pending" or not _in_time(process, confirmed):
        event = "payment.received_late"
    else:
        counted = [t for t in view.transfers if t.status == "confirmed"]
        if view.payment.covered_by(_paid(_in_time(process, counted))):
            if not process_rows.complete_paid(conn, process_id, now):
                raise RuntimeError("a pending process could not be completed")  # rolls back
            process = replace(process, status="completed", updated_at=now)
            event = "payment.completed"
        else:
            event = "payment.partial"
    if refunds is None:
        refunds = refund_rows.of_process(conn, process_id)
    emit(conn, event, process, now, payment=view, refunds=refunds)
    return event


def _outcomes(outcomes):
    """'in 4 processes: 3 payment.completed, 1 payment.partial', for the log."""
    return (f"in {sum(outcomes.values())} processes: "
            + ", ".join(f"{n} {e}" for e, n in sorted(outcomes.items())))


def _with(view, transfers):
    """The view with `transfers` added, in the order views_of gives (block, then log index)."""
    return PaymentView(view.payment, tuple(sorted(view.transfers + tuple(transfers),
                                                  key=lambda t: (t.block_number, t.log_index))),
                       view.unexpected)


def _on_choice(payment, transfer) -> bool:
    """Whether the transfer is in the payment's current token (its amount in the due's units); one
    sent with an earlier choice counts only as views_of rescales it."""
    return (transfer.network_id == payment.network_id
            and transfer.token_contract.lower() == payment.token_contract.lower())


def _in_time(process, transfers):
    """The transfers whose block is at or before the process's expiry (docs/payments.md)."""
    return [t for t in transfers if t.block_timestamp <= process.expires_at]


def _paid(transfers) -> int:
    return sum(t.amount for t in transfers)
