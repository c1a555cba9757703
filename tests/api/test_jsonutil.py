"""app.core.jsonutil: exact JSON out (compact and indented), numbers and key order as received."""
import json

import pytest

from app.core.jsonutil import TooDeep, dumps_compact, dumps_pretty, loads


@pytest.mark.parametrize("text", [
    '{"b": 1, "a": [true, false, null, "\\u00e9"], "c": {}, "d": [], "e": {"f": [{"g": "h"}]}}',
    '[]',
    '"x"',
    '[[[]], {"": {}}]',
])
def test_pretty_is_what_json_dumps_indent_2_writes(text):
    assert dumps_pretty(loads(text.encode())) == json.dumps(json.loads(text), indent=2,
                                                            ensure_ascii=False)


def test_pretty_keeps_number_literals_and_key_order():
    body = b'{"z": 1234.50, "a": 0.30000000000000004, "m": 1E+5, "n": -0}'
    assert dumps_pretty(loads(body)) == (
        '{\n  "z": 1234.50,\n  "a": 0.30000000000000004,\n  "m": 1E+5,\n  "n": -0\n}')
    assert dumps_compact(loads(body)) == '{"z":1234.50,"a":0.30000000000000004,"m":1E+5,"n":-0}'


@pytest.mark.parametrize("text, max_depth, too_deep", [
    ('{"a": "[[[[{{{{"}', 1, False),            # brackets inside strings do not nest
    ('{"a": "\\"[[[", "b": ["]]]"]}', 2, False),  # nor after an escaped quote
    ('{"a": [[]]}', 2, True),
    ('{"a": [[]]}', 3, False),
    ('[{}, {}, {}, {}]', 2, False),              # many containers, not deep
    ('[[{}], [{"a": [1]}]]', 3, True),
])
def test_compact_depth_counts_nesting_not_brackets(text, max_depth, too_deep):
    value = loads(text.encode())
    if too_deep:
        with pytest.raises(TooDeep):
            dumps_compact(value, max_depth=max_depth)
    else:
        assert dumps_compact(value, max_depth=max_depth) == json.dumps(
            json.loads(text), separators=(",", ":"), ensure_ascii=False)
