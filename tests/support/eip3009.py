"""Signed ERC-3009 authorizations for the tests: a payer's key signs TransferWithAuthorization under
a token's EIP-712 domain, as a wallet's eth_signTypedData_v4 would (eth-account)."""
import os

from app.evm.addresses import keccak256
from app.evm.eip3009 import Authorization, Domain
from app.evm.signer import (
    _account_class,  # eth-account, the interpreter's recursion limit kept
)


def payer(seed: str):
    """A fresh account (no gas coin on the node): its key is keccak of `seed`, so runs repeat."""
    return _account_class().from_key(keccak256(seed.encode()))


def sign(account, domain: Domain, *, to, value, valid_after=0, valid_before, nonce=None,
         tamper=None) -> Authorization:
    """An authorization from `account`; `tamper` ({field: value}) replaces fields after signing."""
    nonce = nonce or "0x" + os.urandom(32).hex()
    unsigned = Authorization(from_address=account.address, to=to, value=value,
                             valid_after=valid_after, valid_before=valid_before, nonce=nonce,
                             signature="0x" + "00" * 65)
    signed = account.sign_typed_data(full_message=unsigned.typed_data(domain))
    signature = "0x" + bytes(signed.signature).hex()
    fields = dict(unsigned.__dict__, signature=signature)
    fields.update(tamper or {})
    return Authorization(**fields)


def body(authorization: Authorization) -> dict:
    """The JSON body of POST …/authorization."""
    a = authorization
    return {"from": a.from_address, "to": a.to, "value": str(a.value), "validAfter": a.valid_after,
            "validBefore": a.valid_before, "nonce": a.nonce, "signature": a.signature}
