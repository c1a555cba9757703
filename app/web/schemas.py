"""Request validation (marshmallow 4). Field errors become 400 validation_error naming the field.

Values arrive from app.core.jsonutil.loads, where JSON numbers are JSONNumber literals: the amount
is checked on its exact decimal value, and metadata is re-encoded compactly once, here, to measure
it and to store it.
"""
import re
from dataclasses import dataclass
from decimal import Decimal

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from app.core import currency
from app.core.jsonutil import JSONNumber, TooDeep, dumps_compact
from app.core.money import AmountError, parse_amount
from app.core.records import STATUSES


@dataclass(frozen=True)
class Limits:
    max_amount: Decimal
    amount_decimals: int | None  # None: the currency's minor-unit digits alone
    metadata_max_bytes: int
    metadata_max_depth: int

    @classmethod
    def from_config(cls, config):
        return cls(
            max_amount=config["MAX_AMOUNT"],
            amount_decimals=config["AMOUNT_DECIMALS"],
            metadata_max_bytes=config["METADATA_MAX_BYTES"],
            metadata_max_depth=config["METADATA_MAX_DEPTH"],
        )


class Amount(fields.Field):
    """A JSON number, > 0, <= MAX_AMOUNT, at most AMOUNT_DECIMALS places where set; loads to its
    literal. The currency's own places are checked with the process (app/domain/processes.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, JSONNumber):
            raise ValidationError("Must be a JSON number, not a string, boolean, array or object.")
        limits = self.parent.limits
        places = MAX_PLACES if limits.amount_decimals is None else limits.amount_decimals
        try:
            return parse_amount(value, limits.max_amount, places)
        except AmountError as e:
            raise ValidationError(str(e)) from None


MAX_PLACES = 18  # more than any currency has: the currency's own places are checked after


class Currency(fields.String):
    """An ISO 4217 code in use, in capital letters (app/core/currency.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, JSONNumber) or not isinstance(value, str):
            raise ValidationError("Must be a JSON string.")
        try:
            return currency.check(value)
        except ValueError as e:
            raise ValidationError(str(e)) from None


class Metadata(fields.Field):
    """A JSON object, at most METADATA_MAX_DEPTH deep and METADATA_MAX_BYTES as compact UTF-8
    JSON; loads to that compact text."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("Must be a JSON object.")
        limits = self.parent.limits
        try:
            text = dumps_compact(value, max_depth=limits.metadata_max_depth)
        except TooDeep:
            raise ValidationError(
                f"Must not nest deeper than {limits.metadata_max_depth} levels."
            ) from None
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValidationError("Must not contain unpaired UTF-16 surrogate escapes.") from None
        if size > limits.metadata_max_bytes:
            raise ValidationError(
                f"Must be at most {limits.metadata_max_bytes} bytes as compact UTF-8 JSON"
                f" (got {size})."
            )
        return text


class JSONString(fields.String):
    """A JSON string only: a number literal (a str subclass here) is refused, not taken as text."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, JSONNumber) or not isinstance(value, str):
            raise ValidationError("Must be a JSON string.")
        return super()._deserialize(value, attr, data, **kwargs)


class PlainText(JSONString):
    """Text shown to customers as it is: no control characters (a NUL cannot be stored on
    PostgreSQL, a line break would be invisible on the page)."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
            raise ValidationError("Must be plain text, without control characters.")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise ValidationError("Must not contain unpaired UTF-16 surrogate escapes.")
        return text


class WebUrl(JSONString):
    """An absolute http(s) URL of at most 2,048 characters (whether http is allowed depends on the
    merchant's mode: app/domain/processes.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if not url_form_ok(text):
            raise ValidationError("Must be an absolute https:// URL (http:// in test mode) of at"
                                  " most 2,048 characters.")
        return text


# http(s)://, a host (printable ASCII but / ? # @), then a path, query or fragment of printable
# ASCII; no space. app/openapi.json's pattern is the same.
_URL = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://[!-\"$-.0->A-~]+(?:[/?#][!-~]*)?")


def url_form_ok(text) -> bool:
    """An absolute http(s) URL with a host, at most 2,048 printable ASCII characters."""
    return len(text) <= 2048 and _URL.fullmatch(text) is not None


class PreorderSchema(Schema):
    class Meta:
        unknown = RAISE

    amount = Amount(
        required=True,
        error_messages={"null": "Must be a JSON number, not null."},
    )
    metadata = Metadata(
        load_default="{}",
        error_messages={"null": "Must be a JSON object, not null."},
    )
    currency = Currency(error_messages={"null": "Must be a JSON string, not null."})
    description = PlainText(validate=validate.Length(min=1, max=250),
                            error_messages={"null": "Must be a JSON string, not null."})
    successUrl = WebUrl(validate=validate.Length(max=2048),
                        error_messages={"null": "Must be a JSON string, not null."})
    cancelUrl = WebUrl(validate=validate.Length(max=2048),
                       error_messages={"null": "Must be a JSON string, not null."})

    def __init__(self, limits: Limits, **kwargs):
        self.limits = limits
        super().__init__(**kwargs)


class Count(fields.Field):
    """A whole JSON number from 1 to 10^9 (`2.0` is 2, as JSON Schema's integer has it); null
    allowed (none)."""

    def _deserialize(self, value, attr, data, **kwargs):
        number = Decimal(value) if isinstance(value, JSONNumber) and len(value) <= 40 else None
        if number is None or number != number.to_integral_value() or not 1 <= number <= 10**9:
            raise ValidationError("Must be a whole number from 1 to 1,000,000,000, or null.")
        return int(number)


class UtcTime(JSONString):
    """UTC ISO 8601 with Z, to the second ("2026-12-24T18:00:00Z"); loads to unix seconds."""

    def _deserialize(self, value, attr, data, **kwargs):
        from datetime import UTC, datetime
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", text):
                raise ValueError
            when = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise ValidationError("Must be a UTC time as YYYY-MM-DDTHH:MM:SSZ.") from None
        return int(when.timestamp())


class LinkSchema(Schema):
    """POST /payment-button/links: a payment link (docs/api.md, "Payment links")."""

    class Meta:
        unknown = RAISE

    _null = {"null": "Must not be null."}
    amount = Amount(required=True, error_messages={"null": "Must be a JSON number, not null."})
    currency = Currency(error_messages=_null)
    description = PlainText(required=True, validate=validate.Length(min=1, max=250),
                            error_messages=_null)
    metadata = Metadata(load_default="{}",
                        error_messages={"null": "Must be a JSON object, not null."})
    successUrl = WebUrl(validate=validate.Length(max=2048), error_messages=_null)
    maxPayments = Count(allow_none=True)
    expiresAt = UtcTime(allow_none=True)

    def __init__(self, limits: Limits, **kwargs):
        self.limits = limits
        super().__init__(**kwargs)


class QueryInteger(fields.Integer):
    """A whole number written in plain digits (no sign, no fraction, no spaces)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,6}", value):
            raise ValidationError("Must be a whole number.")
        return super()._deserialize(value, attr, data, **kwargs)


class ListQuerySchema(Schema):
    class Meta:
        unknown = RAISE

    limit = QueryInteger(validate=validate.Range(min=1, max=100))
    starting_after = fields.String()
    status = fields.String(validate=validate.OneOf(STATUSES))


class SandboxPaySchema(Schema):
    class Meta:
        unknown = RAISE

    outcome = fields.String(required=True, validate=validate.OneOf(("success", "failure")))


class ConfirmSchema(Schema):
    class Meta:
        unknown = RAISE

    assetId = JSONString(required=True, validate=validate.Length(min=1, max=64),
                         error_messages={"null": "Must be a JSON string, not null."})
    networkId = JSONString(required=True, validate=validate.Length(min=1, max=64),
                           error_messages={"null": "Must be a JSON string, not null."})


class RefundAmount(fields.Field):
    """A JSON number, loaded as its literal; its bounds and places depend on the payment (what was
    paid, the token's decimals) and are checked by app/domain/refunds.py."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, JSONNumber):
            raise ValidationError("Must be a JSON number, not a string, boolean, array or object.")
        return str(value)


class RefundSchema(Schema):
    class Meta:
        unknown = RAISE

    amount = RefundAmount(required=True,
                          error_messages={"null": "Must be a JSON number, not null."})
    address = JSONString(required=True, validate=validate.Length(
        min=42, max=42, error="Must be 0x followed by 40 hexadecimal digits."),
                         error_messages={"null": "Must be a JSON string, not null."})
    reason = JSONString(validate=validate.Length(max=500))


class EvmAddress(JSONString):
    """0x and 40 hex digits, a valid EIP-55 checksum when it mixes cases; loads to its EIP-55
    form."""

    def _deserialize(self, value, attr, data, **kwargs):
        from app.evm.addresses import is_checksum_valid, to_checksum_address
        text = super()._deserialize(value, attr, data, **kwargs)
        if not is_checksum_valid(text):
            raise ValidationError("Must be 0x followed by 40 hexadecimal digits, with a valid"
                                  " EIP-55 checksum when it mixes upper and lower case.")
        return to_checksum_address(text)


class HexString(JSONString):
    """0x and exactly 2 × `size` hex digits."""

    def __init__(self, size, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if not re.fullmatch(rf"0x[0-9a-fA-F]{{{2 * self.size}}}", text):
            raise ValidationError(f"Must be 0x followed by {2 * self.size} hexadecimal digits"
                                  f" ({self.size} bytes).")
        return text


class Uint256String(JSONString):
    """A whole number of base units as a decimal string (a JSON string: too large for a number)."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if not re.fullmatch(r"0|[1-9][0-9]{0,77}", text) or int(text) >= 2**256:
            raise ValidationError("Must be a whole number of base units as a decimal string, e.g."
                                  " \"12340000\".")
        return int(text)


class UnixSeconds(fields.Field):
    """A JSON integer (no fraction, no exponent) from 0 to 2^63 − 1."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, JSONNumber) or not re.fullmatch(r"0|[1-9][0-9]{0,18}", value) \
                or int(value) >= 2**63:
            raise ValidationError("Must be a JSON integer: unix seconds.")
        return int(value)


class AuthorizationSchema(Schema):
    """POST …/authorization: an ERC-3009 TransferWithAuthorization and its signature."""
    class Meta:
        unknown = RAISE

    _null = {"null": "Must not be null."}
    from_ = EvmAddress(required=True, data_key="from", error_messages=_null)
    to = EvmAddress(required=True, error_messages=_null)
    value = Uint256String(required=True, error_messages=_null)
    validAfter = UnixSeconds(required=True, error_messages=_null)
    validBefore = UnixSeconds(required=True, error_messages=_null)
    nonce = HexString(32, required=True, error_messages=_null)
    signature = HexString(65, required=True, error_messages=_null)


class RefundTransactionSchema(Schema):
    """POST …/refunds/<refundId>/transaction: the transaction that paid the refund (its form is
    checked by app/domain/refunds.py, as for the console's field)."""

    class Meta:
        unknown = RAISE

    txHash = JSONString(required=True, error_messages={"null": "Must be a JSON string, not null."})


class JSONBool(fields.Field):
    """true or false, nothing else (not 1, not "true")."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError("Must be true or false.")
        return value


class Hours(fields.Field):
    """A whole JSON number of hours from 0 to 8,760 (a year)."""

    def _deserialize(self, value, attr, data, **kwargs):
        number = Decimal(value) if isinstance(value, JSONNumber) and len(value) <= 20 else None
        if number is None or number != number.to_integral_value() or not 0 <= number <= 8760:
            raise ValidationError("Must be a whole number of hours from 0 to 8,760.")
        return int(number)


class EventTypes(fields.Field):
    """A list of at most 64 strings (which ones are known: app/domain/endpoints.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or len(value) > 64 or not all(
                isinstance(v, str) and not isinstance(v, JSONNumber) and len(v) <= 64
                for v in value):
            raise ValidationError("Must be a list of event types (strings), or [\"*\"].")
        return value


class EndpointSchema(Schema):
    """POST /payment-button/webhook-endpoints, and (every field optional) its update."""

    class Meta:
        unknown = RAISE

    _null = {"null": "Must not be null."}
    url = WebUrl(required=True, validate=validate.Length(max=2048), error_messages=_null)
    events = EventTypes(error_messages=_null)
    description = PlainText(validate=validate.Length(max=250), allow_none=True)
    enabled = JSONBool(error_messages=_null)


class RollSecretSchema(Schema):
    class Meta:
        unknown = RAISE

    overlapHours = Hours(error_messages={"null": "Must be a whole number, not null."})
