"""The kept chain's proofs, for what refunds and collections record: the blocks the chain watcher
keeps (chain_blocks), and a node's headers linked to them (app/evm/canonical.py says how a header
links and what a proof holds). A kept block is a proof's anchor: while it stays kept with its hash,
the block it proves is still on the chain.
"""
from app.data import transfers as transfer_rows
from app.evm.canonical import NotProven, linked

_EVERY_BLOCK = 2**62


def kept(conn, network_id) -> list:
    """The kept blocks of the network, highest first."""
    return transfer_rows.blocks_from_top(conn, network_id, _EVERY_BLOCK)


def prove(client, conn, network_id, numbers) -> dict:
    """{number: (header, anchor)} for each block number: the node's header at that number, linked to
    the kept chain, and the kept block (ChainBlock) it links to. NotProven when some header does not
    link; RpcError when the node fails."""
    numbers = sorted(set(numbers))
    if not numbers:
        return {}
    blocks = sorted(kept(conn, network_id), key=lambda b: b.number)
    anchors = {}
    for number in numbers:
        anchor = next((b for b in blocks if b.number >= number), None)
        if anchor is None:
            raise NotProven(f"block {number} is above the kept chain: the watcher has not read it"
                            " yet")
        anchors[number] = anchor
    wanted = set()
    for number, anchor in anchors.items():
        wanted.update(range(number, anchor.number + 1))
    headers = client.headers(wanted)
    proven = {}
    for number, anchor in anchors.items():
        linked(headers, number, anchor.number, anchor.hash)
        proven[number] = (headers[number], anchor)
    return proven


def kept_hashes(conn, network_id) -> dict:
    """{number: hash} of the kept blocks: an anchor still there with its hash still proves its
    block; one gone (forgotten after a reorganisation) or replaced means reading the block again;
    below the lowest kept block nothing is known any more (pruned)."""
    return {b.number: b.hash for b in kept(conn, network_id)}
