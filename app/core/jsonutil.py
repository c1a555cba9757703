"""Exact JSON, read and written: numbers kept as their literal text, duplicate keys and NaN refused.

`loads` turns request bytes into Python values where every JSON number is a `JSONNumber` (a str
holding the literal exactly as sent), so no amount ever passes through a binary float and metadata
comes back with the very digits it was given.

`dumps_compact` is the service's one JSON writer: every response body, event body and stored JSON
document is written by it, as compact UTF-8 JSON with keys in their given order. It writes dicts,
lists, tuples, str (always escaped), int, bool and None, and a `Fragment` (JSON text already
encoded, such as stored metadata or an amount's literal) as it is; a float or a Decimal is refused,
so money never goes out through a binary float.
"""
import json
from json.encoder import encode_basestring


class Fragment(str):
    """JSON text already encoded and known valid (stored metadata, a stored process's amount, a
    body written by `dumps_compact`): the writer puts it in as it is."""

    __slots__ = ()


class JSONNumber(Fragment):
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


def dumps_compact(value, max_depth=None) -> str:
    """Compact JSON text of a value (module docstring); TooDeep past max_depth nested containers."""
    return _encode(value, 1, max_depth if max_depth is not None else 1 << 30, None)


def dumps_pretty(value, indent=2) -> str:
    """Indented JSON text of a value, numbers and key order exactly as given."""
    return _encode(value, 1, 1 << 30, " " * indent)


def _encode(value, depth, max_depth, indent) -> str:
    if type(value) is str:
        return encode_basestring(value)
    if isinstance(value, Fragment):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        if depth > max_depth:
            raise TooDeep(depth)
        if isinstance(value, dict):
            colon = ":" if indent is None else ": "
            items = [encode_basestring(key) + colon + _encode(item, depth + 1, max_depth, indent)
                     for key, item in value.items()]
            opening, closing = "{", "}"
        else:
            items = [_encode(item, depth + 1, max_depth, indent) for item in value]
            opening, closing = "[", "]"
        if indent is None:
            return opening + ",".join(items) + closing
        if not items:
            return opening + closing
        inner = "\n" + indent * depth
        return opening + inner + ("," + inner).join(items) + "\n" + indent * (depth - 1) + closing
    raise TypeError(f"not written as JSON: {type(value).__name__}"
                    " (money goes as a str or Fragment)")
