"""Currencies: which codes a process may be priced in, how many decimal places each allows, and how
people of that currency read an amount. The data is Babel's (CLDR); none of it is typed here.

Known codes are those legal tender in some territory today (ISO 4217's active codes, without the
funds codes, precious metals and test codes). Minor-unit digits are CLDR's, which follow ISO 4217
except for a few currencies used without fractions in practice (HUF, IDR: 0): never more places
than ISO allows, so an amount accepted here can always be paid as priced.
"""
from datetime import date
from decimal import Decimal
from functools import lru_cache

from babel.core import get_global
from babel.numbers import format_currency, get_currency_precision, get_territory_currencies

from app.core.money import significant_places

DEFAULT = "USD"


@lru_cache(maxsize=1)
def known() -> frozenset:
    """The currency codes legal tender somewhere today."""
    today = date.today()
    codes = set()
    for territory in get_global("territory_currencies"):
        codes.update(get_territory_currencies(territory, today, tender=True))
    return frozenset(codes)


def is_known(code) -> bool:
    return isinstance(code, str) and code in known()


def check(code) -> str:
    """The code if known, else ValueError with the rule (the caller names its field)."""
    if not is_known(code):
        shown = code if isinstance(code, str) and len(code) <= 8 else "it"
        raise ValueError(f"Must be an ISO 4217 currency code in use, in capital letters (e.g. USD,"
                         f" EUR, JPY): {shown!r} is not one.")
    return code


def minor_digits(code) -> int:
    """Decimal places an amount of `code` may have: JPY 0, EUR 2, KWD 3."""
    return get_currency_precision(code)


def check_pair(text) -> tuple[str, str]:
    """"EUR/USD" as ("EUR", "USD"); ValueError unless it is a code or a token's symbol (a peg
    guard: "USDC/USD", "USDC.e/USD"), then a different currency code. A symbol is compared in
    capitals (the contract's own case varies: USDe, USDbC): it comes back in capitals."""
    base, slash, quote = (text or "").partition("/")
    base = base.upper()
    if not slash or not (2 <= len(base) <= 16 and base.isprintable() and " " not in base
                         and "/" not in base) or quote not in known() or base == quote:
        raise ValueError(f"A pair is two different codes, the first priced in the second, e.g."
                         f" EUR/USD (one euro in dollars): {str(text)[:40]!r} is not one.")
    return base, quote


def display(amount, code, locale="en") -> str:
    """An amount (a process's, a link's, a sum of them) as people read it: "€19.99", "¥1,200",
    "19.99 EUR" for a code Babel has no sign for; `amount` an exact decimal (text or Decimal),
    shown with the currency's places. Never rounded: one with more places than its currency has
    (stored before currencies, under a larger AMOUNT_DECIMALS) shows exactly, with its code:
    "0.001 USD"."""
    value = Decimal(amount)
    if significant_places(value) > minor_digits(code):
        return f"{format(value.normalize(), 'f')} {code}"
    return format_currency(value, code, locale=locale, currency_digits=True)
