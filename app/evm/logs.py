"""ERC-20 Transfer logs as the chain watcher, refunds and collections read them: eth_getLogs calls
(a range the node refuses as too large split in halves, many recipients' calls batched), and each
log parsed strictly; the `transfer` call data a wallet sends. The client and the values of its
answers are rpc.py's.
"""
from app.evm.rpc import (
    HEX_DIGITS,
    ChainMoved,
    Malformed,
    NotATransfer,
    RpcError,
    hash32,
    hex_address,
    is_batch_too_large,
    quantity,
)

LOGS_PER_BATCH = 20  # eth_getLogs calls of address chunks sent in one batch (each may be heavy)

# keccak256("Transfer(address,address,uint256)"): the topic of every ERC-20 Transfer log.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

# Messages with which common nodes and providers refuse an eth_getLogs whose range or result is too
# large (geth, Erigon, Infura's -32005, Alchemy, QuickNode, public RPCs): the caller splits the
# range.
_TOO_LARGE = (
    "query returned more than", "response size", "too many", "limit exceeded", "block range",
    "range is too large", "range too large", "exceed", "max results", "results limit",
)


def is_too_large(error: RpcError) -> bool:
    text = str(error).lower()
    return error.code == -32005 or any(marker in text for marker in _TOO_LARGE)


class Log:
    """One ERC-20 Transfer log: token contract and addresses lowercase, amount in base units."""
    __slots__ = ("token", "from_address", "to_address", "amount", "tx_hash", "log_index",
                 "block_number", "block_hash")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields[name])


def topic_of(address: str) -> str:
    """An address as an indexed event argument: left-padded to 32 bytes, lowercase."""
    return "0x" + "0" * 24 + address[2:].lower()


TRANSFER_SELECTOR = "a9059cbb"  # transfer(address,uint256)


def transfer_calldata(to: str, amount: int) -> str:
    """The call data of an ERC-20 `transfer(to, amount)` (amount in base units)."""
    return ("0x" + TRANSFER_SELECTOR + to[2:].lower().rjust(64, "0")
            + format(amount, "x").rjust(64, "0"))


def transfer_logs(client, from_block, to_block, tokens, recipients, split=True, pins=None,
                  strict=None) -> list:
    """Transfer logs of `tokens` (None: any contract) to `recipients` (None: to anyone) in
    [from_block, to_block], in as many eth_getLogs calls as needed: a range the node refuses as
    too large (or whose result is) is split in halves, down to single blocks (`split`; else the
    error is raised). With `pins`, each call is sent in a batch with them; `strict`: get_logs's."""
    try:
        return get_logs(client, from_block, to_block, tokens, recipients, pins, strict)
    except RpcError as e:
        if not split or from_block == to_block or not is_too_large(e):
            raise
    middle = (from_block + to_block) // 2
    return (transfer_logs(client, from_block, middle, tokens, recipients, pins=pins, strict=strict)
            + transfer_logs(client, middle + 1, to_block, tokens, recipients, pins=pins,
                            strict=strict))


def transfer_logs_by_chunks(client, from_block, to_block, chunks, pins=None, strict=None) -> list:
    """The Transfer logs of any contract to each chunk of recipients in the range: the chunks'
    eth_getLogs calls LOGS_PER_BATCH to a batch (each batch with `pins`), so many deposit
    addresses cost few round trips. A batch the node refuses (too large a batch, range or
    result) is asked again chunk by chunk (`transfer_logs`, which splits the range)."""
    logs = []
    for i in range(0, len(chunks), LOGS_PER_BATCH):
        group = chunks[i:i + LOGS_PER_BATCH]
        if len(group) == 1:
            logs += transfer_logs(client, from_block, to_block, None, group[0], pins=pins,
                                  strict=strict)
            continue
        calls = [_logs_call(from_block, to_block, None, chunk) for chunk in group]
        try:
            results = client.batch(calls) if pins is None else client.pinned(calls, pins)
        except RpcError as e:
            if not (is_too_large(e) or is_batch_too_large(e)):
                raise
            for chunk in group:
                logs += transfer_logs(client, from_block, to_block, None, chunk, pins=pins,
                                      strict=strict)
            continue
        for result in results:
            logs += parse_logs(result, from_block, to_block, None, strict)
    return logs


def parse_transfer_log(value) -> Log:
    """An ERC-20 Transfer log (3 topics, the amount one 32-byte word in `data`), parsed strictly:
    ChainMoved for a log the node marks `"removed": true` (its block left the chain while it
    answered); Malformed for a field the node writes that is not of its form (the contract's
    address, the transaction hash, log index, block number and hash, the topics' 32-byte words);
    NotATransfer (a Malformed) for a shape the contract chose: another event, an ERC-721 Transfer,
    an unpadded address, data that is not one word. The node's fields are checked first, so a
    NotATransfer is a well-formed log of another shape. Whether it is a fault is the caller's
    decision."""
    what = "eth_getLogs"
    if not isinstance(value, dict):
        raise Malformed(f"{what}: a log is not an object")
    removed = value.get("removed", False)
    if removed is True:
        raise ChainMoved(f"{what}: a log marked removed (its block left the chain)")
    if removed is not False:
        raise Malformed(f"{what}: a log's removed is not a boolean")
    token = hex_address(value.get("address"), what + ".address")
    envelope = dict(
        token=token,
        tx_hash=hash32(value.get("transactionHash"), what + ".transactionHash"),
        log_index=quantity(value.get("logIndex"), what + ".logIndex"),
        block_number=quantity(value.get("blockNumber"), what + ".blockNumber"),
        block_hash=hash32(value.get("blockHash"), what + ".blockHash"),
    )
    topics = value.get("topics")
    if not isinstance(topics, list) or len(topics) > 4:
        raise Malformed(f"{what}: a log's topics are not a list of at most 4")
    topics = [hash32(topic, what + ".topics") for topic in topics]
    if len(topics) != 3:
        raise NotATransfer(f"{what}: a log that is not an ERC-20 Transfer (not 3 topics)", token)
    if topics[0] != TRANSFER_TOPIC:
        raise NotATransfer(f"{what}: a log that is not a Transfer", token)
    data = value.get("data")
    if (not isinstance(data, str) or not data.startswith("0x")
            or len(data) > 2 and not HEX_DIGITS.fullmatch(data, 2)):
        raise Malformed(f"{what}.data: not hex bytes")
    return Log(
        from_address=_topic_address(topics[1], token),
        to_address=_topic_address(topics[2], token),
        amount=_transfer_amount(data, token),
        **envelope,
    )


def _transfer_amount(data, token):
    """The Transfer's value: `data` must be exactly one ABI word."""
    if len(data) != 66:
        raise NotATransfer("eth_getLogs.data: not one 32-byte ABI word", token)
    return int(data[2:], 16)


def _topic_address(topic, token):
    """An indexed address (a checked 32-byte topic): 12 zero bytes, then the address."""
    if not topic.startswith("0x" + "0" * 24):
        raise NotATransfer("eth_getLogs.topics: not an address", token)
    return "0x" + topic[-40:]


def get_logs(client, from_block, to_block, tokens, recipients, pins=None, strict=None) -> list[Log]:
    """One eth_getLogs call: Transfer logs of `tokens` (None: of any contract) to `recipients`
    (None: anyone) in the range; with `pins`, in one batch after them (`Client.pinned`). Every log
    must be in the range and of a contract asked for, its node's fields well-formed (else RpcError:
    a fault). A log whose shape is its contract's doing (NotATransfer) is a fault when its contract
    is in `strict` (lowercase; None: every contract), else it is left out: a contract nobody
    registered cannot make a poll fail."""
    call = _logs_call(from_block, to_block, tokens, recipients)
    result = client.call(*call) if pins is None else client.pinned([call], pins)[0]
    return parse_logs(result, from_block, to_block, tokens, strict)


def _logs_call(from_block, to_block, tokens, recipients):
    topics = [TRANSFER_TOPIC] if recipients is None else [
        TRANSFER_TOPIC, None, [topic_of(a) for a in recipients]]
    params = {"fromBlock": hex(from_block), "toBlock": hex(to_block), "topics": topics}
    if tokens is not None:
        params["address"] = list(tokens)
    return ("eth_getLogs", [params])


def parse_logs(result, from_block, to_block, tokens, strict) -> list[Log]:
    """An eth_getLogs answer, checked as `get_logs` says."""
    if not isinstance(result, list):
        raise Malformed("eth_getLogs: the result is not a list")
    asked = None if tokens is None else {token.lower() for token in tokens}
    logs = []
    for value in result:
        try:
            log = parse_transfer_log(value)
        except NotATransfer as e:
            if strict is None or e.token in strict:
                raise
            continue
        if not from_block <= log.block_number <= to_block:
            raise Malformed("eth_getLogs: a log outside the range asked for")
        if asked is not None and log.token not in asked:
            raise Malformed("eth_getLogs: a log of a contract not asked for")
        logs.append(log)
    return logs
