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
    """Decimal places once trailing zeros are dropped: 1.500 -> 1, 100 -> 0,
    0.30000000000000004 -> 17."""
    sign, digits, exponent = value.as_tuple()
    if exponent >= 0:
        return 0
    zeros = 0
    for digit in reversed(digits):
        if digit != 0 or zeros == -exponent:
            break
        zeros += 1
    return -exponent - zeros


def to_base_units(amount: str, decimals: int) -> int:
    """An amount literal in token units as integer base units (amount × 10^decimals), exactly.
    AmountError when the token's decimals cannot hold it (19.99 of a 1-decimal token)."""
    value = Decimal(amount)
    sign, digits, exponent = value.as_tuple()
    if -exponent > decimals and significant_places(value) > decimals:
        raise AmountError(
            f"{amount} cannot be paid exactly in a token with {decimals} decimal places."
        )
    # Exact integer arithmetic on the digits: no context precision, no rounding. When the
    # exponent is below -decimals, the digits dropped are zeros (checked above).
    mantissa, shift = int("".join(map(str, digits))), exponent + decimals
    units = mantissa * 10 ** shift if shift >= 0 else mantissa // 10 ** -shift
    return -units if sign else units


def format_units(units: int, decimals: int) -> str:
    """Integer base units as a token-units decimal string without trailing zeros: 12340000 with 6
    decimals is "12.34", 0 is "0"."""
    whole, fraction = divmod(abs(units), 10 ** decimals)
    text = str(whole)
    if fraction:
        text += "." + str(fraction).rjust(decimals, "0").rstrip("0")
    return "-" + text if units < 0 else text



# The underpayment tolerance: percent of the amount due a merchant forgoes (exchanges and some
# wallets deduct their fee from what they send).
MAX_TOLERANCE = Decimal(5)
TOLERANCE_PLACES = 2


def parse_tolerance(text) -> str:
    """A tolerance in percent as given ("0.5", "1", "0.25"): a decimal from 0 to 5 with at most two
    decimal places, parsed exactly; returned without trailing zeros ("0.50" -> "0.5"). AmountError
    with the rule otherwise."""
    rule = f"The tolerance must be a percentage from 0 to {MAX_TOLERANCE}, with at most" \
           f" {TOLERANCE_PLACES} decimal places (e.g. 0.5)."
    if not isinstance(text, str) or not text.strip():
        raise AmountError(rule)
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise AmountError(rule) from None
    if (not value.is_finite() or value < 0 or value > MAX_TOLERANCE
            or significant_places(value) > TOLERANCE_PLACES):
        raise AmountError(rule)
    return format(value.normalize(), "f") if value else "0"


def minimum_paid(amount_due: int, tolerance: str) -> int:
    """The least sum (base units) that completes a payment of `amount_due` under `tolerance`
    percent: amount_due × (1 − tolerance/100), rounded UP to a whole base unit, so the merchant
    never forgoes more than the percent. Exact rational arithmetic, never a float."""
    numerator, denominator = Decimal(tolerance).as_integer_ratio()
    scale = 100 * denominator
    return -(-amount_due * (scale - numerator) // scale)
