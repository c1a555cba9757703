"""Exact JSON: numbers kept as their literal text, duplicate keys and NaN refused, compact output.

`loads` turns request bytes into Python values where every JSON number is a `JSONNumber` (a str
holding the literal exactly as sent), so no amount ever passes through a binary float and metadata
comes back with the very digits it was given. `dumps_compact` writes such values back as compact
UTF-8 JSON, keys in their original order.
"""
import json
from json.encoder import encode_basestring


class JSONNumber(str):
    """The literal text of a JSON number, e.g. '19.99', '-0', '1E+5'."""

    __slots__ = ()


class InvalidJSON(ValueError):
    """The body is not one well-formed UTF-8 JSON document."""


class TooDeep(ValueError):
    """A value nests containers deeper than allowed."""


def _refuse_constant(name):
    raise InvalidJSON(f"{name} is not valid JSON")


def _object(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidJSON(f"duplicate key {json.dumps(key)[:80]}")
        obj[key] = value
    return obj


_decoder = json.JSONDecoder(
    parse_float=JSONNumber,
    parse_int=JSONNumber,
    parse_constant=_refuse_constant,
    object_pairs_hook=_object,
)


def loads(data: bytes):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJSON("Request body is not valid UTF-8.") from None
    if text.startswith("\ufeff"):
        raise InvalidJSON("Request body starts with a byte order mark; send plain UTF-8.")
    try:
        return _decoder.decode(text)
    except json.JSONDecodeError as e:
        raise InvalidJSON(
            f"Request body is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})."
        ) from None
    except InvalidJSON as e:
        raise InvalidJSON(f"Request body is not valid JSON: {e}.") from None
    except RecursionError:
        raise InvalidJSON("Request body nests too deeply.") from None


def dumps_compact(value, max_depth=None):
    """Compact JSON text of a value made by `loads`; TooDeep past max_depth nested containers."""
    out = []
    _encode(value, out.append, 1, max_depth if max_depth is not None else 1 << 30, None)
    return "".join(out)


def dumps_pretty(value, indent=2):
    """Indented JSON text of a value made by `loads`, numbers and key order exactly as given."""
    out = []
    _encode(value, out.append, 1, 1 << 30, " " * indent)
    return "".join(out)


def _encode(value, emit, depth, max_depth, indent):
    if isinstance(value, JSONNumber):
        emit(value)
    elif isinstance(value, str):
        emit(encode_basestring(value))
    elif value is None:
        emit("null")
    elif value is True:
        emit("true")
    elif value is False:
        emit("false")
    elif isinstance(value, (dict, list)):
        if depth > max_depth:
            raise TooDeep(depth)
        is_dict = isinstance(value, dict)
        items = value.items() if is_dict else enumerate(value)
        emit("{" if is_dict else "[")
        for i, (key, item) in enumerate(items):
            if i:
                emit(",")
            if indent is not None:
                emit("\n" + indent * depth)
            if is_dict:
                emit(encode_basestring(key))
                emit(": " if indent is not None else ":")
            _encode(item, emit, depth + 1, max_depth, indent)
        if indent is not None and value:
            emit("\n" + indent * (depth - 1))
        emit("}" if is_dict else "]")
    else:  # pragma: no cover - loads() makes nothing else
        raise TypeError(f"not a JSON value: {type(value).__name__}")
