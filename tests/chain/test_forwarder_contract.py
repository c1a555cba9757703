"""The forwarder factory (app/evm/contracts/ForwarderFactory.sol) on the real Hardhat node.

The committed build is what the pinned compiler makes; deposit addresses computed in Python are
where the factory creates its forwarders; whatever reaches an address (tokens with or without a
boolean answer, the gas coin, before or after a collection) goes to that address's payout address
and nowhere else, whoever calls the factory or the address with whatever arguments."""
import json
import shutil
import subprocess

import pytest
from eth_abi import decode, encode
from eth_account import Account
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.chain_node import CHAIN_DIR

from app.evm import forwarder
from app.evm.addresses import keccak256, to_checksum_address

# keccak256 of the Forwarder's creation code and of the factory's runtime code, per version. Every
# deposit address handed out depends on the first: changing the contract or its compile settings
# means a new version (a new factory on every network, the old one kept for its addresses), so it
# must be a deliberate change of these lines; a version's lines never change.
CODE_HASHES = {
    1: ("807d501f79e14b51388e8f86ae4e507c547d1418d9136adbb36b01e5984f4d87",
        "969d358bb329712ae081fbea31a9dbe9f86be91d32e66a5032d800009a61af1f"),
    2: ("8b857537e3d50d9361a31b26cc8c733de6a1182a433b8102d364461dd718e71d",
        "fcc8fa500bac1be0534bc87081c9b6f3bcf70d1cdad3f14a0d6f0fdace1b138b"),
}

ETHER = 10**18
NORMAL, RETURN_FALSE, REVERT, REENTER = range(4)  # HostileToken.Mode


def abi_call(signature: str, types=(), values=()) -> str:
    return "0x" + (keccak256(signature.encode("ascii"))[:4]
                   + encode(list(types), list(values))).hex()


def hexdata(data: bytes) -> str:
    return "0x" + data.hex()


class Env:
    """The node as these tests use it: deploy, fund, read balances, send transactions that may
    fail."""

    def __init__(self, chain, version=forwarder.VERSION):
        self.chain, self.version = chain, version
        self.deployer = chain.accounts[0]
        self.usd = to_checksum_address(chain.token)
        self.factory = self.deploy(forwarder.factory_creation_code(version))

    def deploy(self, code: bytes) -> str:
        receipt = self.chain.send(self.deployer, None, hexdata(code))
        return to_checksum_address(receipt["contractAddress"])

    def deploy_build(self, name: str, *args: int) -> str:
        build = json.loads((CHAIN_DIR / "token" / f"{name}.json").read_text())
        return self.deploy(bytes.fromhex(build["bytecode"][2:])
                           + encode(["uint256"] * len(args), list(args)))

    def call(self, to: str, data: str) -> bytes:
        return bytes.fromhex(self.chain.rpc("eth_call", {"to": to, "data": data}, "latest")[2:])

    def balance(self, token: str, holder: str) -> int:
        return decode(["uint256"],
                      self.call(token, abi_call("balanceOf(address)", ["address"], [holder])))[0]

    def coin(self, holder: str) -> int:
        return int(self.chain.rpc("eth_getBalance", holder, "latest"), 16)

    def code(self, address: str) -> bytes:
        return bytes.fromhex(self.chain.rpc("eth_getCode", address, "latest")[2:])

    def give(self, token: str, to: str, amount: int):
        self.chain.send(self.deployer, token,
                        abi_call("transfer(address,uint256)", ["address", "uint256"], [to, amount]))

    def give_coin(self, to: str, amount: int):
        self.chain.send(self.deployer, to, value=amount)

    def collect(self, tokens, deposits, sender=None):
        return self.chain.send(sender or self.chain.accounts[9], self.factory,
                               hexdata(forwarder.collect_calldata(tokens, deposits)))

    def attempt(self, sender: str, to: str, data: str = "0x", value: int = 0) -> bool:
        """A transaction that may revert: True when it was mined and succeeded."""
        try:
            tx_hash = self.chain.rpc("eth_sendTransaction",
                                     {"from": sender, "to": to, "data": data, "value": hex(value),
                                      "gas": hex(3_000_000)})
        except RuntimeError:  # Hardhat answers a reverted transaction with an error
            return False
        return self.chain.rpc("eth_getTransactionReceipt", tx_hash)["status"] == "0x1"

    def hostile(self, supply=10**12) -> str:
        return self.deploy_build("HostileToken", supply)

    def set_mode(self, token: str, mode: int, target: str = "0x" + "0" * 40, data: bytes = b""):
        self.chain.send(self.deployer, token,
                        abi_call("setMode(uint8,address,bytes)", ["uint8", "address", "bytes"],
                                 [mode, target, data]))


@pytest.fixture
def env(chain, request):
    """The current factory deployed; a test parametrized with `env` (indirect) names the version."""
    return Env(chain, getattr(request, "param", forwarder.VERSION))


BOTH_VERSIONS = pytest.mark.parametrize("env", sorted(forwarder.BUILDS), indirect=True,
                                        ids=lambda v: f"v{v}")


def new_payout() -> str:
    """A payout address nobody in the test sends from (a fresh key's address)."""
    return Account.create().address


def deposit(env, payout, process_id):
    s = forwarder.salt(process_id)
    return forwarder.deposit_address(env.factory, payout, s, env.version), (payout, s)


def coin_logs(receipt):
    """(address, wei) of the receipt's anonymous logs: a version-2 forwarder's gas coin sent."""
    return [(to_checksum_address(log["address"]), int(log["data"], 16))
            for log in receipt["logs"] if log["topics"] == []]


def transfers_from(receipt, holder):
    """(token, to, amount) of the receipt's ERC-20 Transfer logs sent from `holder`."""
    topic = "0x" + keccak256(b"Transfer(address,address,uint256)").hex()
    return [(to_checksum_address(log["address"]),
             to_checksum_address("0x" + log["topics"][2][-40:]), int(log["data"], 16))
            for log in receipt["logs"]
            if log["topics"][:1] == [topic] and log["topics"][1][-40:] == holder[2:].lower()]


@pytest.mark.parametrize("version", sorted(forwarder.BUILDS))
def test_committed_build_is_what_the_pinned_compiler_makes(version):
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed to recompile the forwarder factory (tests/chain: npm ci)",
                    pytrace=False)
    source = forwarder.BUILDS[version].stem
    built = subprocess.run([node, "compile-forwarder.js", source], cwd=CHAIN_DIR,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert built.stdout == forwarder.BUILDS[version].read_text()
    committed = json.loads(built.stdout)
    assert committed["compiler"].startswith("solc-js 0.8.26+")
    assert committed["settings"] == {"optimizer": {"enabled": True, "runs": 200},
                                     "evmVersion": "cancun", "metadata": {"appendCBOR": False}}
    forwarder_hash, factory_hash = CODE_HASHES[version]
    assert keccak256(bytes.fromhex(committed["Forwarder"]["bytecode"][2:])).hex() == forwarder_hash
    assert keccak256(bytes.fromhex(committed["ForwarderFactory"]["deployedBytecode"][2:])).hex() \
        == factory_hash


def test_python_addresses_are_where_the_factory_creates_its_forwarders(env):
    payouts = [new_payout(), new_payout().lower(), to_checksum_address(env.chain.accounts[3])]
    before = [env.balance(env.usd, payout) for payout in payouts]
    expected = {}
    for n, payout in enumerate(payouts):
        for process_id in (f"prc_{n}_a", f"prc_{n}_b"):
            address, dep = deposit(env, payout, process_id)
            assert address == to_checksum_address(address)  # EIP-55 cased
            on_chain = decode(["address"], env.call(env.factory, abi_call(
                "depositAddress(address,bytes32)", ["address", "bytes32"], list(dep))))[0]
            assert to_checksum_address(on_chain) == address
            env.give(env.usd, address, 1000 + n)
            expected[address] = (to_checksum_address(payout), 1000 + n, dep)
    receipt = env.collect([env.usd], [dep for _, _, dep in expected.values()])
    for n, payout in enumerate(payouts):
        assert env.balance(env.usd, payout) == before[n] + 2 * (1000 + n)
    for address, (payout, amount, _) in expected.items():
        assert transfers_from(receipt, address) == [(env.usd, payout, amount)]
        assert env.balance(env.usd, address) == 0
        assert env.code(address) == b""  # self-destructed: the address is an empty account again
    # the same process under another payout or factory is another address
    s = forwarder.salt("prc_0_a")
    first = forwarder.deposit_address(env.factory, payouts[0], s, env.version)
    assert first != forwarder.deposit_address(env.factory, payouts[2], s, env.version)
    assert first != forwarder.deposit_address(env.usd, payouts[0], s, env.version)
    assert first != forwarder.deposit_address(env.factory, payouts[0], s, 3 - env.version)


@BOTH_VERSIONS
def test_the_deployed_factory_is_recognised_by_its_code(env):
    assert forwarder.factory_version(env.code(env.factory)) == env.version
    # Exactly a factory's runtime code, nothing else: another contract, none, one byte more or less.
    for code in (env.code(env.usd), b"", env.code(env.factory) + b"\x00",
                 env.code(env.factory)[:-1]):
        assert forwarder.factory_version(code) is None


@BOTH_VERSIONS
def test_tokens_and_the_gas_coin_move_to_the_payout_whoever_sends_the_collection(env):
    """A stranger holding only the gas coin (a fresh key, signing its own transaction) collects a
    USDT-style token (transfer returns no boolean), the test ERC-20 and gas coin sent by mistake."""
    usdt = env.deploy_build("NoReturnToken", 10**15)
    payout = new_payout()
    address, dep = deposit(env, payout, "prc_usdt")
    env.give(usdt, address, 5_000_000)
    env.give(env.usd, address, 7_000_000)
    env.give_coin(address, 3 * ETHER // 2)
    stranger = Account.create()
    env.give_coin(stranger.address, ETHER)
    tx = {"to": env.factory, "data": hexdata(forwarder.collect_calldata([usdt, env.usd], [dep])),
          "gas": 500_000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 1, "nonce": 0,
          "value": 0, "chainId": int(env.chain.rpc("eth_chainId"), 16)}
    signed = stranger.sign_transaction(tx)
    tx_hash = env.chain.rpc("eth_sendRawTransaction", hexdata(signed.raw_transaction))
    receipt = env.chain.rpc("eth_getTransactionReceipt", tx_hash)
    assert receipt["status"] == "0x1"
    assert sorted(transfers_from(receipt, address)) == sorted([(usdt, payout, 5_000_000),
                                                               (env.usd, payout, 7_000_000)])
    assert (env.balance(usdt, payout), env.balance(env.usd, payout), env.coin(payout)) == \
        (5_000_000, 7_000_000, 3 * ETHER // 2)
    assert (env.balance(usdt, address), env.balance(env.usd, address),
            env.coin(address)) == (0, 0, 0)
    assert env.code(address) == b""
    assert coin_logs(receipt) == ([(address, 3 * ETHER // 2)] if env.version >= 2 else [])


def test_each_forwarder_logs_the_gas_coin_it_sends_and_only_that(env):
    """One anonymous log per address that held the gas coin, from that address, of exactly what
    reached the payout; none for an address without it, none for a collection of nothing, none
    from an address whose collection names another payout (the victim's salt under the
    attacker's payout is another address)."""
    payout, attacker = new_payout(), to_checksum_address(env.chain.accounts[6])
    rich, rich_dep = deposit(env, payout, "prc_rich")
    tokens_only, tokens_dep = deposit(env, payout, "prc_tokens")
    dust, dust_dep = deposit(env, payout, "prc_dust")
    env.give_coin(rich, 3 * ETHER // 2)
    env.give(env.usd, rich, 5)
    env.give(env.usd, tokens_only, 7)
    env.give_coin(dust, 1)
    receipt = env.collect([env.usd], [(attacker, rich_dep[1]), rich_dep, tokens_dep, dust_dep])
    assert coin_logs(receipt) == [(rich, 3 * ETHER // 2), (dust, 1)]
    assert env.coin(payout) == 3 * ETHER // 2 + 1 and env.balance(env.usd, payout) == 12
    assert coin_logs(env.collect([env.usd], [rich_dep, tokens_dep, dust_dep])) == []  # empty now
    env.give_coin(tokens_only, 99)  # paid after its collection: logged by the next one only
    assert coin_logs(env.collect([], [tokens_dep])) == [(tokens_only, 99)]


def test_a_second_payment_to_a_collected_address_is_collected_again(env):
    payout = new_payout()
    address, dep = deposit(env, payout, "prc_twice")
    env.give(env.usd, address, 10)
    env.collect([env.usd], [dep])
    assert (env.balance(env.usd, address), env.balance(env.usd, payout),
            env.code(address)) == (0, 10, b"")
    env.give(env.usd, address, 32)
    env.give_coin(address, 12345)
    env.collect([env.usd], [dep])
    assert (env.balance(env.usd, address), env.coin(address)) == (0, 0)
    assert (env.balance(env.usd, payout), env.coin(payout)) == (42, 12345)
    # nothing left: a collection of an empty address succeeds, moves nothing
    env.collect([env.usd], [dep])
    assert env.balance(env.usd, payout) == 42


def test_a_stranger_calling_with_any_arguments_moves_nothing_but_to_the_payout(env):
    victim_payout = new_payout()
    victim, victim_dep = deposit(env, victim_payout, "prc_victim")
    env.give(env.usd, victim, 900)
    env.give_coin(victim, 777)
    attacker = env.chain.accounts[6]
    attacker_payout = to_checksum_address(attacker)
    s = victim_dep[1]
    attacker_usd, attacker_coin_start = env.balance(env.usd, attacker), env.coin(attacker)

    def untouched():
        assert (env.balance(env.usd, victim), env.coin(victim)) == (900, 777)
        assert (env.balance(env.usd, victim_payout), env.coin(victim_payout)) == (0, 0)
        assert env.balance(env.usd, attacker) == attacker_usd

    # the victim's salt with the attacker's payout (another address), every salt-like value, the
    # victim's address itself as a salt or as a "token", the zero address as payout
    victim_word = bytes(12) + bytes.fromhex(victim[2:])
    for payout, salt in [(attacker_payout, s), (attacker_payout, bytes(32)),
                         (attacker_payout, victim_word), ("0x" + "0" * 40, s), (env.factory, s),
                         (victim, s), (env.usd, s)]:
        assert env.attempt(attacker, env.factory, hexdata(forwarder.collect_calldata(
            [env.usd, victim, env.factory], [(payout, salt)])))
        untouched()
    # calldata the Python encoder would never write: offsets pointing anywhere, short data
    selector = keccak256(forwarder.COLLECT_SIGNATURE.encode())[:4]
    for body in [b"", bytes(4), selector, selector + bytes(64),
                 selector + encode(["uint256", "uint256"], [2**255, 0]),
                 selector + encode(["uint256", "uint256", "uint256", "address"],
                                   [0x40, 0x40, 1, victim])]:
        env.attempt(attacker, env.factory, hexdata(body))
        untouched()
    # the factory's other functions, unknown selectors, and the gas coin sent to the factory
    for data in [abi_call("tokens()"),
                 abi_call("depositAddress(address,bytes32)", ["address", "bytes32"],
                          [attacker_payout, s]),
                 "0x12345678", "0x" + "ff" * 100,
                 abi_call("transfer(address,uint256)", ["address", "uint256"], [attacker, 900])]:
        env.attempt(attacker, env.factory, data)
        untouched()
    assert env.attempt(attacker, env.factory, "0x", value=10) is False
    # the deposit address itself: an empty account, whatever it is called with
    for data in ["0x",
                 abi_call("transfer(address,uint256)", ["address", "uint256"], [attacker, 900]),
                 "0xff"]:
        assert env.attempt(attacker, victim, data) is True
        untouched()
    assert env.code(victim) == b""
    # the only collection that touches the victim's address pays the victim's payout, whoever sends
    # it
    assert env.attempt(attacker, env.factory,
                       hexdata(forwarder.collect_calldata([env.usd], [victim_dep])))
    assert (env.balance(env.usd, victim_payout), env.coin(victim_payout)) == (900, 777)
    assert env.balance(env.usd, attacker) == attacker_usd
    assert env.coin(attacker) < attacker_coin_start  # it paid gas, and received nothing


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_calls_move_a_victim_s_money_only_to_its_payout(env, data):
    """Generated collect arguments and raw calldata, from a stranger: the victim's tokens and gas
    coin are at its address or at its payout address, never anywhere else (examples share the chain:
    once one of them names the victim's own deposit, the money is at the payout for the rest)."""
    if not hasattr(env, "victim"):
        env.victim_payout = new_payout()
        env.victim, env.victim_dep = deposit(env, env.victim_payout, "prc_generated")
        env.give(env.usd, env.victim, 900)
        env.give_coin(env.victim, 777)
        env.attacker = env.chain.accounts[6]
        env.attacker_usd = env.balance(env.usd, env.attacker)
    addresses = st.sampled_from([env.victim_payout, env.victim, env.attacker, env.factory, env.usd,
                                 "0x" + "0" * 40]) | st.binary(min_size=20, max_size=20).map(
        lambda raw: to_checksum_address("0x" + raw.hex()))
    salts = st.sampled_from([env.victim_dep[1], bytes(32)]) | st.binary(min_size=32, max_size=32)
    if data.draw(st.booleans(), label="encoded"):
        tokens = data.draw(st.lists(addresses, max_size=4), label="tokens")
        deposits = data.draw(st.lists(st.tuples(addresses, salts), max_size=4), label="deposits")
        call = forwarder.collect_calldata(tokens, deposits)
    else:
        call = keccak256(forwarder.COLLECT_SIGNATURE.encode())[:4] \
            + data.draw(st.binary(max_size=400), label="raw")
    env.attempt(env.attacker, env.factory, hexdata(call))
    assert env.balance(env.usd, env.victim) + env.balance(env.usd, env.victim_payout) == 900
    assert env.coin(env.victim) + env.coin(env.victim_payout) == 777
    assert env.balance(env.usd, env.attacker) == env.attacker_usd


def test_two_merchants_never_touch_each_other_s_funds(env):
    a, b = new_payout(), new_payout()
    a1, a1_dep = deposit(env, a, "prc_a1")
    a2, a2_dep = deposit(env, a, "prc_a2")
    b1, b1_dep = deposit(env, b, "prc_b1")
    for address, amount in ((a1, 1), (a2, 20), (b1, 300)):
        env.give(env.usd, address, amount)
    # B's salt under A's payout is another address: collecting it leaves B's address alone
    env.collect([env.usd], [(a, b1_dep[1])])
    assert env.balance(env.usd, b1) == 300
    env.collect([env.usd], [a1_dep, b1_dep, a2_dep])  # one call, interleaved
    assert (env.balance(env.usd, a), env.balance(env.usd, b)) == (21, 300)
    assert [env.balance(env.usd, x) for x in (a1, a2, b1)] == [0, 0, 0]


def test_a_payout_change_leaves_old_addresses_paying_the_old_payout(env):
    old, new = new_payout(), new_payout()
    before, before_dep = deposit(env, old, "prc_before")  # handed out under the old payout
    after, after_dep = deposit(env, new, "prc_after")  # the merchant changed its payout since
    env.give(env.usd, before, 5)
    env.give(env.usd, after, 7)
    # the old process under the new payout: not its address
    env.collect([env.usd], [(new, before_dep[1]), after_dep])
    assert (env.balance(env.usd, before), env.balance(env.usd, new)) == (5, 7)
    env.collect([env.usd], [before_dep])
    assert (env.balance(env.usd, old), env.balance(env.usd, new)) == (5, 7)


def test_a_failing_token_blocks_neither_the_other_tokens_nor_the_other_addresses(env):
    liar, wall = env.hostile(), env.hostile()
    no_code = new_payout()  # a "token" without code: its answers are empty
    payout = new_payout()
    deposits = [deposit(env, payout, f"prc_bad_{i}") for i in range(2)]
    for address, _ in deposits:
        env.give(liar, address, 50)
        env.give(wall, address, 60)
        env.give(env.usd, address, 70)
    env.set_mode(liar, RETURN_FALSE)
    env.set_mode(wall, REVERT)
    env.collect([liar, wall, no_code, env.usd], [dep for _, dep in deposits])
    assert env.balance(env.usd, payout) == 140
    assert (env.balance(liar, payout), env.balance(wall, payout)) == (0, 0)
    for address, _ in deposits:
        assert (env.balance(liar, address), env.balance(wall, address),
                env.balance(env.usd, address)) == (50, 60, 0)
    # once the tokens behave, the next collection moves what they left behind
    env.set_mode(liar, NORMAL)
    env.set_mode(wall, NORMAL)
    env.collect([liar, wall], [dep for _, dep in deposits])
    assert (env.balance(liar, payout), env.balance(wall, payout)) == (100, 120)


@pytest.mark.parametrize("reentry", ["another deposit", "the same deposit"])
def test_a_token_reentering_the_factory_is_refused_and_the_collection_completes(env, reentry):
    token = env.hostile()
    victim_payout = new_payout()
    victims = [deposit(env, victim_payout, f"prc_re_{i}") for i in range(3)]
    for address, _ in victims:
        env.give(token, address, 11)
        env.give(env.usd, address, 13)
    attacker = to_checksum_address(env.chain.accounts[6])
    target = ((attacker, forwarder.salt("prc_attacker")) if reentry == "another deposit"
              else victims[1][1])
    env.set_mode(token, REENTER, env.factory, forwarder.collect_calldata([env.usd], [target]))
    attacker_usd = env.balance(env.usd, attacker)
    env.collect([token, env.usd], [dep for _, dep in victims])
    reentries = decode(["uint256"], env.call(token, abi_call("reentries()")))[0]
    succeeded = decode(["uint256"], env.call(token, abi_call("reentriesSucceeded()")))[0]
    assert (reentries, succeeded) == (3, 0)  # one attempt per forwarder, each refused
    assert (env.balance(token, victim_payout), env.balance(env.usd, victim_payout)) == (33, 39)
    assert env.balance(env.usd, attacker) == attacker_usd
    for address, _ in victims:
        assert (env.balance(token, address), env.balance(env.usd, address)) == (0, 0)


def test_a_payout_contract_that_refuses_the_gas_coin_still_receives_it(env):
    # a contract with no receive or fallback function: a plain transfer to it reverts
    refuser = env.hostile()
    assert env.attempt(env.deployer, refuser, "0x", value=1) is False
    address, dep = deposit(env, refuser, "prc_refuser")
    env.give_coin(address, 4321)
    env.give(env.usd, address, 9)
    env.collect([env.usd], [dep])
    assert (env.coin(refuser), env.balance(env.usd, refuser), env.coin(address)) == (4321, 9, 0)


def test_the_same_deposit_twice_in_one_call_is_refused_whole(env):
    payout = new_payout()
    address, (_, s) = deposit(env, payout, "prc_dup")
    env.give(env.usd, address, 3)
    # what the Python encoder writes lists it once ...
    assert forwarder.collect_calldata([env.usd, env.usd.lower()],
                                      [(payout, s), (payout.lower(), s)]) \
        == forwarder.collect_calldata([env.usd], [(payout, s)])
    # ... a hand-made call listing it twice reverts (CREATE2 to an address created earlier in the
    # same transaction fails), moving nothing
    selector = keccak256(forwarder.COLLECT_SIGNATURE.encode())[:4]
    twice = selector + encode(["address[]", "(address,bytes32[])[]"],
                              [[env.usd], [(payout, [s, s])]])
    assert env.attempt(env.chain.accounts[5], env.factory, hexdata(twice)) is False
    assert (env.balance(env.usd, address), env.balance(env.usd, payout)) == (3, 0)


def test_the_token_list_is_empty_outside_a_collection(env):
    assert decode(["address[]"], env.call(env.factory, abi_call("tokens()"))) == ((),)


def test_salt_and_call_encoding():
    assert forwarder.salt("prc_123") == bytes(16) + keccak256(b"prc_123")[:16]
    assert forwarder.salt("prc_123").hex() == ("00000000000000000000000000000000"
                                                "8cbe78b4a3afa566a87fbcbdc3c71abc")
    assert forwarder.salt("prc_124") != forwarder.salt("prc_123")
    for bad in ("", None, 5):
        with pytest.raises(ValueError):
            forwarder.salt(bad)
    factory, payout = "0x" + "11" * 20, "0x" + "22" * 20
    with pytest.raises(ValueError):
        forwarder.deposit_address(factory, payout, bytes(31))
    with pytest.raises(ValueError):
        forwarder.deposit_address(factory, "0x1234", bytes(32))
    # EIP-1014's own example 5: deployer 0x00000000000000000000000000000000deadbeef, salt
    # 0xcafebabe (as a word), init code 0xdeadbeef repeated 11 times
    init = bytes.fromhex("deadbeef" * 11)
    digest = keccak256(b"\xff" + bytes.fromhex("00000000000000000000000000000000deadbeef")
                       + bytes.fromhex("00000000000000000000000000000000"
                                       "000000000000000000000000cafebabe")
                       + keccak256(init))
    assert to_checksum_address("0x" + digest[12:].hex()) \
        == "0x1d8bfDC5D46DC4f61D6b6115972536eBE6A8854C"
    data = forwarder.collect_calldata([payout], [(payout, bytes(32)), ("0x" + "33" * 20, bytes(32)),
                                                 (payout, b"\x01" * 32)])
    assert data[:4] == keccak256(b"collect(address[],(address,bytes32[])[])")[:4]
    tokens, groups = decode(["address[]", "(address,bytes32[])[]"], data[4:])
    assert tokens == (payout,)
    assert groups == ((payout, (bytes(32), b"\x01" * 32)), ("0x" + "33" * 20, (bytes(32),)))
