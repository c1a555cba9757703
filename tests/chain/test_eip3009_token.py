"""The test ERC-3009 token (tests/chain/token/TestUSDC.sol) attacked on a real node, and the
service's reading of it (app/evm/eip3009.py): its EIP-712 domain read and checked (eip712Domain(),
or name() and version() on a token without EIP-5267, as USDC has it), a token without ERC-3009
refused, and signatures recovered as the token recovers them. The token's committed build is what
the pinned compiler makes of its source."""
import shutil
import subprocess

import pytest
from support import eip3009 as signing
from support.chain_node import CHAIN_DIR

from app.evm import eip3009
from app.evm.addresses import to_checksum_address
from app.evm.rpc import Client

SUPPLY = 10**15
PAYER = signing.payer("token-test payer")
STRANGER = signing.payer("token-test stranger")


def test_committed_token_builds_are_what_the_pinned_compiler_makes():
    """tests/chain/compile.js recompiles every test token with the pinned solc-js and compares
    each with its committed token/<Contract>.json (the builds the tests and the demo deploy)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed to recompile the test tokens (tests/chain: npm ci)",
                    pytrace=False)
    checked = subprocess.run([node, "compile.js"], cwd=CHAIN_DIR, capture_output=True, text=True,
                             timeout=300)
    assert checked.returncode == 0, checked.stderr


@pytest.fixture
def usdc(chain):
    token = to_checksum_address(chain.deploy_token(SUPPLY, contract="TestUSDC"))
    chain.transfer(PAYER.address, 50_000_000, token=token)
    return token


def domain_of(chain, token):
    return eip3009.read_domain(Client(chain.url), token, 31337)


def submit(chain, token, authorization, sender=1):
    """transferWithAuthorization sent by dev account `sender` (the relayer); the receipt, or the
    node's error (a revert) as RuntimeError."""
    return chain.send(chain.accounts[sender], token, "0x" + eip3009.calldata(authorization).hex())


def balance(chain, token, owner):
    return eip3009.balance_of(Client(chain.url), token, owner)


def test_a_correct_authorization_moves_the_funds_and_the_payer_pays_no_gas(chain, usdc):
    domain = domain_of(chain, usdc)
    assert domain == eip3009.Domain("Test USD Coin", "2", 31337, usdc)
    to = chain.accounts[5]
    deadline = chain.timestamp() + 600
    authorization = signing.sign(PAYER, domain, to=to, value=12_340_000, valid_before=deadline)
    assert eip3009.recover(domain, authorization) == PAYER.address
    assert int(chain.rpc("eth_getBalance", PAYER.address, "latest"), 16) == 0
    before = balance(chain, usdc, to)

    receipt = submit(chain, usdc, authorization)
    assert balance(chain, usdc, PAYER.address) == 50_000_000 - 12_340_000
    assert balance(chain, usdc, to) == before + 12_340_000
    assert int(chain.rpc("eth_getBalance", PAYER.address, "latest"), 16) == 0  # the relayer paid
    topics = {log["topics"][0] for log in receipt["logs"]}
    assert "0x" + eip3009.keccak256(b"AuthorizationUsed(address,bytes32)").hex() in topics
    assert eip3009.authorization_used(Client(chain.url), usdc, PAYER.address, authorization.nonce)
    print(f"\ntransferWithAuthorization gas used: {int(receipt['gasUsed'], 16)}")


def _refused(chain, usdc, authorization, reason):
    before = balance(chain, usdc, PAYER.address)
    with pytest.raises(RuntimeError, match=reason):
        submit(chain, usdc, authorization)
    assert balance(chain, usdc, PAYER.address) == before


def test_tampered_expired_early_and_reused_authorizations_revert(chain, usdc):
    domain = domain_of(chain, usdc)
    now = chain.timestamp()
    to = chain.accounts[5]
    good = dict(to=to, value=1_000_000, valid_before=now + 600)
    for tampered in (dict(value=2_000_000), dict(to=chain.accounts[6]),
                     dict(valid_before=now + 601), dict(from_address=STRANGER.address)):
        _refused(chain, usdc, signing.sign(PAYER, domain, **good, tamper=tampered),
                 "invalid signature")
    other_chain = eip3009.Domain(domain.name, domain.version, 1, usdc)
    _refused(chain, usdc, signing.sign(PAYER, other_chain, **good), "invalid signature")
    _refused(chain, usdc,
             signing.sign(STRANGER, domain, **good, tamper={"from_address": PAYER.address}),
             "invalid signature")
    _refused(chain, usdc, signing.sign(PAYER, domain, to=to, value=1, valid_before=now - 1),
             "authorization is expired")
    _refused(chain, usdc, signing.sign(PAYER, domain, to=to, value=1, valid_after=now + 3600,
                                       valid_before=now + 7200), "authorization is not yet valid")
    once = signing.sign(PAYER, domain, **good)
    submit(chain, usdc, once)
    _refused(chain, usdc, once, "authorization is used")
    # the same nonce for another transfer is used as well
    _refused(chain, usdc, signing.sign(PAYER, domain, to=to, value=5, valid_before=now + 600,
                                       nonce=once.nonce), "authorization is used")


def test_the_domain_of_a_token_without_eip5267_is_read_from_name_and_version(chain):
    legacy = to_checksum_address(chain.deploy_token(SUPPLY, contract="TestUSDCLegacy"))
    with pytest.raises(RuntimeError):
        chain.rpc("eth_call", {"to": legacy, "data": "0x" + eip3009.EIP712_DOMAIN}, "latest")
    assert domain_of(chain, legacy) == eip3009.Domain("Test USD Coin", "2", 31337, legacy)


def test_a_token_without_erc3009_is_refused(chain):
    with pytest.raises(eip3009.Eip3009Error, match="EIP-712 domain cannot be read"):
        domain_of(chain, to_checksum_address(chain.token))  # TestUSD: a plain ERC-20


def test_a_domain_on_another_chain_id_is_refused(chain, usdc):
    with pytest.raises(eip3009.Eip3009Error, match="chain id 31337"):
        eip3009.read_domain(Client(chain.url), usdc, 1)
