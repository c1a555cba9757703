"""Token amounts: the process amount scaled to integer base units and back, exactly."""
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.money import AmountError, format_units, to_base_units


@given(st.integers(min_value=1, max_value=10**8), st.integers(min_value=0, max_value=2),
       st.integers(min_value=2, max_value=36))
def test_amounts_round_trip_through_base_units(cents, places, decimals):
    literal = str(Decimal(cents).scaleb(-places))
    units = to_base_units(literal, decimals)
    assert units == int(Decimal(literal) * 10**decimals)  # exact at this size
    assert Decimal(format_units(units, decimals)) == Decimal(literal)


@pytest.mark.parametrize("literal, decimals, units, shown", [
    ("19.99", 6, 19_990_000, "19.99"),
    ("19.90", 1, 199, "19.9"),
    ("1000000", 36, 10**42, "1000000"),
    ("999999.99", 18, 999_999_990_000_000_000_000_000, "999999.99"),
    ("0.01", 2, 1, "0.01"),
    ("150", 0, 150, "150"),
])
def test_exact_examples(literal, decimals, units, shown):
    assert to_base_units(literal, decimals) == units
    assert format_units(units, decimals) == shown


@pytest.mark.parametrize("literal, decimals", [("19.99", 0), ("19.99", 1), ("0.001", 2)])
def test_amounts_the_token_cannot_hold(literal, decimals):
    with pytest.raises(AmountError) as info:
        to_base_units(literal, decimals)
    assert str(info.value) == (
        f"{literal} cannot be paid exactly in a token with {decimals} decimal places.")


def test_format_units_never_uses_an_exponent():
    assert format_units(0, 6) == "0"
    assert format_units(1, 18) == "0.000000000000000001"
    assert format_units(10**40, 6) == "1" + "0" * 34
