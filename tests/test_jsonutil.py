"""app.jsonutil.dumps_pretty: indented JSON that keeps numbers and key order exactly as received."""
import json

import pytest

from app.jsonutil import dumps_compact, dumps_pretty, loads


@pytest.mark.parametrize("text", [
    '{"b": 1, "a": [true, false, null, "\\u00e9"], "c": {}, "d": [], "e": {"f": [{"g": "h"}]}}',
    '[]',
    '"x"',
    '[[[]], {"": {}}]',
])
def test_pretty_is_what_json_dumps_indent_2_writes(text):
    assert dumps_pretty(loads(text.encode())) == json.dumps(json.loads(text), indent=2, ensure_ascii=False)


def test_pretty_keeps_number_literals_and_key_order():
    body = b'{"z": 1234.50, "a": 0.30000000000000004, "m": 1E+5, "n": -0}'
    assert dumps_pretty(loads(body)) == (
        '{\n  "z": 1234.50,\n  "a": 0.30000000000000004,\n  "m": 1E+5,\n  "n": -0\n}')
    assert dumps_compact(loads(body)) == '{"z":1234.50,"a":0.30000000000000004,"m":1E+5,"n":-0}'
