"""The chain watcher: finds token transfers to deposit addresses, counts their confirmations, and
writes the payment events (`flask --app app watch-payments`, app/cli/watcher.py). The words used
here in a narrow sense (poll, step, pins, kept block, tag, deep enough, seen / confirmed /
orphaned / reversed, anchor…) are defined in docs/payments.md, "Glossary".

A provider's URL is a pool of nodes, each call may reach another one (lagging, on an abandoned fork,
of another chain): nothing is recorded on one answer alone. docs/payments.md, "RPC pools", says what
each check defends against. One poll of a network (`Watcher.poll_network`, loop.py), every RPC call
bounded by the client's timeouts:
  0-2. window.first_reads: one batch, one node: the chain id (another chain's node ends the poll,
     nothing of the answer looked at), the head's block (below the head already seen: a lagging
     node, a fault), the newest kept block and, under a finality mode, the node's `safe` or
     `finalized` block (none: a fault, never a fallback to counting). reorg.check: a kept hash
     that differs is a reorganisation, read back to the fork.
  3. scan, in steps of at most `max_range` blocks up to the head: window.read_window reads a step
     (its logs and the headers proving them, every batch with the step's pins: plain data, no
     database), then record.record_step writes it in one transaction that decides seen, confirmed
     or completing. The watched addresses are kept between polls (watched.py). Any mismatch is a
     fault, nothing of the step recorded.
  4. confirm.confirm: `seen` transfers deep enough (or at or below the tag's block), proven on
     the kept chain, become `confirmed`, each process with its event; unexpected.py reports the
     unexpected transfers.
  5. refunds: the merchants' transfers that pay pending refunds (app/chain/refunds.py).

Each network is polled in a thread of its own (loop.py), so a slow or hung node delays only its
network. A chain that moved under a poll's reads (ChainMoved) has the poll read again at once; a
second move, and every other fault (unreachable node, timeouts, HTTP errors, malformed answers),
ends the poll of that network only: logged with the URL's host alone, retried after a backoff
doubling up to `backoff_max`. Each poll's outcome is written to the network's row
(app/domain/health.py reads it). Nothing half-done is committed. SIGTERM/SIGINT: each network's
step under way commits, the command exits 0 once every thread has ended.

Several watcher processes, on any hosts: each network is polled by the one that holds its lease
(lease.py, taken at the start of each poll and renewed in every transaction it writes); the others
make no RPC call for it and take over once the lease expires.
"""
from app.chain.watcher.loop import MAX_ADDRESSES, MAX_RANGE, Watcher

__all__ = ["MAX_ADDRESSES", "MAX_RANGE", "Watcher"]
