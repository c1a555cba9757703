"""What an ERC-20 contract says of itself: `symbol()` and `decimals()`.

`assets add` checks the operator's --decimals and --symbol against them (`read`): a token registered
with the wrong decimals would make every order due a fraction (or a multiple) of its amount. The
watcher describes the unexpected transfers it reports with them (`describe`: a token nobody
registered, sent to a deposit address). Such a contract may be anyone's, hostile included: it may
revert, burn its gas, or answer garbage. So each call carries a small gas cap (CALL_GAS), and an
answer is taken only when it is exactly of the ABI's form: a symbol is a short printable text (an
ABI `string`, or the `bytes32` older tokens such as MKR return), decimals one word of at most 255
(a uint8). Anything else is None. Nothing here is money: what counts is a registered asset's row.
"""
from app.evm import rpc

SYMBOL = "0x95d89b41"  # symbol()
DECIMALS = "0x313ce567"  # decimals()
CALL_GAS = 100_000
MAX_SYMBOL = 32  # characters
PER_BATCH = 50  # contracts per JSON-RPC batch (two calls each)


def describe(client, contracts) -> dict:
    """{contract: (symbol or None, decimals or None)} for each contract (lowercase 0x addresses),
    read at the latest block in JSON-RPC batches of PER_BATCH contracts. RpcError only when the node
    cannot be asked at all (unreachable, not a batch): a contract's failing call is None, never a
    fault."""
    contracts = list(dict.fromkeys(contracts))
    found = {}
    for start in range(0, len(contracts), PER_BATCH):
        chunk = contracts[start:start + PER_BATCH]
        calls = [("eth_call", [{"to": contract, "data": selector, "gas": hex(CALL_GAS)}, "latest"])
                 for contract in chunk for selector in (SYMBOL, DECIMALS)]
        answers = client.batch(calls, what="eth_call(symbol, decimals)", tolerate=True)
        found.update((contract, (parse_symbol(answers[2 * i]), parse_decimals(answers[2 * i + 1])))
                     for i, contract in enumerate(chunk))
    return found


def read(client, contract, chain_id) -> tuple[str | None, int | None]:
    """(symbol, decimals) of `contract` (parse_symbol, parse_decimals: None for an answer that is
    not one), asked in one JSON-RPC batch with the node's chain id, so one node answers for both:
    rpc.WrongChain when that node serves another chain than `chain_id`; RpcError when it cannot be
    asked, or a call fails (a contract that reverts)."""
    calls = [("eth_chainId", [])] + [
        ("eth_call", [{"to": contract, "data": selector, "gas": hex(CALL_GAS)}, "latest"])
        for selector in (SYMBOL, DECIMALS)]
    reported, symbol, decimals = client.batch(calls, what="eth_call(symbol, decimals)")
    reported = rpc.quantity(reported, "eth_chainId")
    if reported != chain_id:
        raise rpc.wrong_chain(client.url, reported, chain_id)
    return parse_symbol(symbol), parse_decimals(decimals)


def _bytes(value) -> bytes | None:
    if (not isinstance(value, str) or not value.startswith("0x") or len(value) % 2
            or len(value) > 2 + 2 * 4096):
        return None
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        return None


def parse_symbol(value) -> str | None:
    """An eth_call answer of symbol(): the text, or None (an error, garbage, too long, not
    printable)."""
    raw = _bytes(value)
    if raw is None:
        return None
    if len(raw) == 32:  # bytes32: the text, padded with zero bytes on the right
        text = raw.rstrip(b"\0")
    elif len(raw) >= 64 and len(raw) % 32 == 0:  # string: offset 32, length, the bytes padded
        offset, length = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big")
        if offset != 32 or length > 4 * MAX_SYMBOL or len(raw) != 64 + -(-length // 32) * 32:
            return None
        text, padding = raw[64:64 + length], raw[64 + length:]
        if padding.strip(b"\0"):
            return None
    else:
        return None
    try:
        symbol = text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if (not symbol or len(symbol) > MAX_SYMBOL or not symbol.isprintable()
            or symbol != symbol.strip()):
        return None
    return symbol


def parse_decimals(value) -> int | None:
    """An eth_call answer of decimals(): a uint8 in one ABI word, or None."""
    try:
        decimals = rpc.word(value, "decimals()")
    except rpc.Malformed:
        return None
    return decimals if decimals <= 255 else None
