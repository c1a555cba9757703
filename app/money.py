"""Amounts: exact decimals from their JSON literal, never through a binary float."""
from decimal import Decimal, InvalidOperation


class AmountError(ValueError):
    """The amount breaks a rule; str() is the message shown to the merchant."""


def parse_amount(literal: str, max_amount: Decimal, places: int) -> str:
    """Check a JSON number literal and return the amount's literal to store.

    The stored literal keeps the digits sent ('19.90' stays '19.90'); exponent forms ('1.5e2') are
    written out positionally ('150'). Decimal places are counted without trailing zeros.
    """
    try:
        value = Decimal(literal)  # exact: the constructor never rounds
    except InvalidOperation:  # an exponent beyond 10**±999999999999999999
        if literal.lower().partition("e")[2].startswith("-"):
            raise AmountError(f"Must have at most {places} decimal places.") from None
        raise AmountError(f"Must be less than or equal to {max_amount}.") from None
    if not value > 0:
        raise AmountError("Must be greater than 0.")
    if value > max_amount:
        raise AmountError(f"Must be less than or equal to {max_amount}.")
    if significant_places(value) > places:
        raise AmountError(f"Must have at most {places} decimal places.")
    if "e" in literal or "E" in literal:
        return format(value, "f")
    return literal


def significant_places(value: Decimal) -> int:
    """Decimal places once trailing zeros are dropped: 1.500 -> 1, 100 -> 0, 0.30000000000000004 -> 17."""
    sign, digits, exponent = value.as_tuple()
    if exponent >= 0:
        return 0
    zeros = 0
    for digit in reversed(digits):
        if digit != 0 or zeros == -exponent:
            break
        zeros += 1
    return -exponent - zeros
