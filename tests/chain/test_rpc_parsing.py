"""The one strict parser of what a node sends (app/evm/rpc.py, logs.py, pins.py): quantities, ABI
words, ERC-20 Transfer logs, and the pins every batch of a watcher's step must agree on. No node:
the values are what a lying or broken one could answer."""
import pytest

from app.evm.logs import TRANSFER_TOPIC, parse_logs, parse_transfer_log, topic_of
from app.evm.pins import Pins
from app.evm.rpc import ChainMoved, Malformed, NotATransfer, WrongChain, quantity, word

TOKEN = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
SENDER, RECIPIENT = "0x" + "11" * 20, "0x" + "22" * 20
SIX = "0x" + format(6_000_000, "064x")


def _log(**changes):
    value = {"address": TOKEN, "topics": [TRANSFER_TOPIC, topic_of(SENDER), topic_of(RECIPIENT)],
             "data": SIX, "blockNumber": "0x10", "blockHash": "0x" + "ab" * 32,
             "transactionHash": "0x" + "cd" * 32, "logIndex": "0x0", "removed": False}
    value.update(changes)
    return value


@pytest.mark.parametrize("text, value", [("0x0", 0), ("0x1a", 26), ("0x" + "f" * 64, 2**256 - 1)])
def test_a_quantity(text, value):
    assert quantity(text, "q") == value


@pytest.mark.parametrize("text", ["0x", "1a", "0x-1", "0x+1", "0x1_0", " 0x1", "0x 1", "0X1",
                                  "0x" + "1" * 65, 26, None])
def test_not_a_quantity(text):
    with pytest.raises(Malformed, match="q: not a hex quantity"):
        quantity(text, "q")


@pytest.mark.parametrize("text", [SIX[:-1], SIX + "0", "0x-" + SIX[3:], "0x+" + SIX[3:],
                                  "0x " + SIX[3:], SIX[:-7] + "_" + SIX[-6:], SIX.upper()[2:]])
def test_not_a_word(text):
    with pytest.raises(Malformed, match="not one 32-byte ABI word"):
        word(text, "w")


def test_a_transfer_log():
    log = parse_transfer_log(_log(address=TOKEN.upper().replace("0X", "0x")))
    assert (log.token, log.from_address, log.to_address, log.amount) == (
        TOKEN, SENDER, RECIPIENT, 6_000_000)
    assert (log.block_number, log.log_index, log.block_hash) == (16, 0, "0x" + "ab" * 32)
    assert parse_transfer_log({k: v for k, v in _log().items()
                               if k != "removed"}).amount == 6_000_000


@pytest.mark.parametrize("changes, message, contracts", [
    # What the node writes: never the contract's doing, a fault whoever emitted the log.
    ({"data": "0x-" + SIX[3:]}, "eth_getLogs.data: not hex bytes", False),
    ({"blockNumber": "0x-10"}, "blockNumber: not a hex quantity", False),
    ({"removed": "false"}, "removed is not a boolean", False),
    ({"address": "0x" + "11" * 19}, "address: not an address", False),
    ({"topics": [TRANSFER_TOPIC, topic_of(SENDER), "0x22"]}, "topics: not a 32-byte hash", False),
    ({"topics": [TRANSFER_TOPIC] * 5}, "not a list of at most 4", False),
    # What a contract chooses to emit: the shape of another event, left to the caller.
    ({"data": "0x"}, "eth_getLogs.data: not one 32-byte ABI word", True),  # not the ERC-20 shape
    ({"data": SIX + "00" * 32}, "eth_getLogs.data: not one 32-byte ABI word", True),
    ({"topics": [TRANSFER_TOPIC, topic_of(SENDER), topic_of(RECIPIENT), "0x" + "00" * 32]},
     "not an ERC-20 Transfer", True),  # ERC-721's Transfer: the token id indexed
    ({"topics": ["0x" + "ee" * 32, topic_of(SENDER), topic_of(RECIPIENT)]}, "not a Transfer", True),
    ({"topics": [TRANSFER_TOPIC, topic_of(SENDER), "0x" + "ff" * 12 + RECIPIENT[2:]]},
     "not an address", True),  # two topics would name one address
])
def test_a_malformed_log_raises_for_the_caller_to_decide(changes, message, contracts):
    with pytest.raises(Malformed, match=message) as raised:
        parse_transfer_log(_log(**changes))
    assert isinstance(raised.value, NotATransfer) is contracts
    if contracts:
        assert raised.value.token == TOKEN


def test_a_contract_s_odd_log_is_left_out_unless_the_contract_is_registered():
    odd = _log(topics=[TRANSFER_TOPIC, topic_of(SENDER), topic_of(RECIPIENT), "0x" + "00" * 32])
    good = _log(address="0x" + "33" * 20)
    assert [entry.token for entry in parse_logs([odd, good], 0, 100, None, strict=set())] == [
        "0x" + "33" * 20]
    with pytest.raises(NotATransfer):
        parse_logs([odd, good], 0, 100, None, strict={TOKEN})
    with pytest.raises(Malformed, match="outside the range"):  # the node's doing: always a fault
        parse_logs([good], 17, 100, None, strict=set())
    with pytest.raises(Malformed, match="contract not asked for"):
        parse_logs([good], 0, 100, [TOKEN], strict=set())


def test_a_log_marked_removed_is_a_moved_chain_not_a_malformed_log():
    with pytest.raises(ChainMoved, match="marked removed") as raised:
        parse_transfer_log(_log(removed=True))
    assert not isinstance(raised.value, Malformed)


def _header(number, digit):
    return {"number": hex(number), "hash": "0x" + digit * 64, "parentHash": "0x" + "0" * 64,
            "timestamp": "0x1"}


def test_pins_hold_every_batch_of_a_step_to_one_chain():
    pins = Pins(31337, {10: "0x" + "a" * 64, 12: None})
    assert pins.calls() == [("eth_chainId", []), ("eth_getBlockByNumber", ["0xa", False]),
                            ("eth_getBlockByNumber", ["0xc", False])]
    pins.check("http://node.example/KEY", ["0x7a69", _header(10, "a"), _header(12, "c")])
    assert pins.headers[12].hash == "0x" + "c" * 64  # the first answer's: later ones must agree
    pins.check("http://node.example/KEY", ["0x7a69", _header(10, "a"), _header(12, "c")])
    for answer, error, message in [
            (["0x89", _header(10, "a"), _header(12, "c")], WrongChain,
             "http://node.example answers for chain id 137, not the network's chain id 31337"),
            (["0x7a69", _header(10, "b"), _header(12, "c")], ChainMoved, "block 10 is 0xbbb"),
            (["0x7a69", _header(10, "a"), _header(12, "d")], ChainMoved, "block 12 is 0xddd"),
            (["0x7a69", _header(10, "a"), None], ChainMoved, "block 12: not on the node"),
            (["0x7a69", _header(10, "a"), _header(13, "c")], Malformed, "another number")]:
        with pytest.raises(error, match=message):
            pins.check("http://node.example/KEY", answer)
    assert Pins(None, {10: "0x" + "a" * 64}).calls() == [("eth_getBlockByNumber", ["0xa", False])]


def _abi_string(text: bytes, length=None):
    padded = text + b"\0" * (-len(text) % 32)
    return ("0x" + (32).to_bytes(32, "big").hex()
            + (len(text) if length is None else length).to_bytes(32, "big").hex() + padded.hex())


@pytest.mark.parametrize("answer, symbol", [
    (_abi_string(b"USDC"), "USDC"),
    (_abi_string("USD₮".encode()), "USD₮"),  # Tether's own symbol on some chains
    ("0x" + b"MKR".ljust(32, b"\0").hex(), "MKR"),  # bytes32, as MKR answers
    (_abi_string(b""), None),
    (_abi_string(b"A" * 33), None),  # not short
    (_abi_string(b"US\nDC"), None),  # not printable
    (_abi_string("USD\u202eC".encode()), None),  # a direction override: not printable
    (_abi_string(b" USDC"), None),
    (_abi_string(b"\xff\xfe"), None),  # not UTF-8
    (_abi_string(b"USDC", length=200), None),  # a length beyond the data
    ("0x" + (64).to_bytes(32, "big").hex() + _abi_string(b"USDC")[66:], None),  # another offset
    (_abi_string(b"USDC")[:-2] + "01", None),  # garbage in the padding
    ("0x010203", None), ("0x", None), ("0xzz", None), (None, None), (7, None),
    ("0x" + "00" * 5000, None),  # more than any symbol
])
def test_a_symbol_is_short_printable_text_or_nothing(answer, symbol):
    from app.evm.tokens import parse_symbol

    assert parse_symbol(answer) == symbol


@pytest.mark.parametrize("answer, decimals", [
    ("0x" + format(6, "064x"), 6), ("0x" + format(255, "064x"), 255),
    ("0x" + format(256, "064x"), None),
    ("0x" + "f" * 64, None), ("0x06", None), ("0x", None), (None, None),
])
def test_decimals_are_one_word_of_a_uint8_or_nothing(answer, decimals):
    from app.evm.rpc import RpcError
    from app.evm.tokens import parse_decimals

    assert parse_decimals(answer) == decimals
    assert parse_decimals(RpcError("execution reverted")) is None
