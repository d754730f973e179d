"""``WITH cdc = {...}``: the option map parsed exactly as ScyllaDB's ``cdc::options`` does.

>>> from cqlcdc.cql.ast import Constant, MapLiteral
>>> enabled = MapLiteral(((Constant("string", "enabled"), Constant("boolean", "true")),))
>>> options = parse_cdc_options(enabled)
>>> options.enabled, options.preimage, options.ttl_s
(True, 'false', 86400)
"""

from __future__ import annotations

from cqlcdc.cql.ast import Constant, MapLiteral, Term
from cqlcdc.errors import ConfigurationError, CqlSyntaxError
from cqlcdc.schema.model import CdcOptions

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)
_LONG_MAX = 2**63 - 1


def option_map(term: Term, option: str) -> dict[str, str]:
    """A ``{'k': v, ...}`` property value as ScyllaDB's ``convert_property_map`` builds it.

    Keys and values must be constants; their text is kept as written (strings unescaped).

    Raises:
        CqlSyntaxError: the value is not a map of constants, or a key is repeated.
    """
    if not isinstance(term, MapLiteral):
        raise CqlSyntaxError(f"Invalid value for property '{option}'. It should be a map.")
    result: dict[str, str] = {}
    for key, value in term.entries:
        if not isinstance(key, Constant):
            raise CqlSyntaxError(f"Invalid property name: {key}")
        if not isinstance(value, Constant):
            raise CqlSyntaxError(f"Invalid property value: {key.text} for property: {value}")
        if key.text in result:
            raise CqlSyntaxError(f"Multiple definition for property {key.text}")
        result[key.text] = value.text
    return result


def _stoi(text: str) -> int | None:
    """``std::stoi``: leading blanks, a sign, digits, then anything. None when no digits.

    Raises:
        ConfigurationError: the number does not fit a 32-bit int (``std::out_of_range``).
    """
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    start = i
    if i < len(text) and text[i] in "+-":
        i += 1
    digits_start = i
    while i < len(text) and text[i].isascii() and text[i].isdigit():
        i += 1
    if i == digits_start:
        return None
    value = int(text[start:i])
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ConfigurationError("Invalid CDC option: ttl too large")
    return value


def cdc_options_from_map(options: dict[str, str]) -> CdcOptions:
    """Build ``CdcOptions`` from a string map (``cdc::options::options``).

    Keys and values are lower-cased before they are interpreted; error messages show the
    value as written. Options not named keep their defaults, so ALTER replaces the whole map.

    Raises:
        ConfigurationError: an unknown key or an invalid value (ScyllaDB's messages).
    """
    enabled: bool | None = None
    preimage = "false"
    postimage = False
    delta = "full"
    ttl_s = 86400
    for raw_key, raw_value in options.items():
        key = raw_key.lower()
        value = raw_value.lower()
        is_true = value in ("true", "1")
        is_false = value in ("false", "0")
        if key == "enabled":
            if not (is_true or is_false):
                raise ConfigurationError(f'Invalid value for CDC option "enabled": {raw_value}')
            enabled = is_true
        elif key == "preimage":
            if is_true:
                preimage = "true"
            elif value == "full":
                preimage = "full"
            elif is_false:
                preimage = "false"
            else:
                raise ConfigurationError(f'Invalid value for CDC option "preimage": {raw_value}')
        elif key == "postimage":
            if not (is_true or is_false):
                raise ConfigurationError(f'Invalid value for CDC option "postimage": {raw_value}')
            postimage = is_true
        elif key == "delta":
            if value == "keys":
                delta = "keys"
            elif value != "full":
                raise ConfigurationError(f'Invalid value for CDC option "delta": {raw_value}')
        elif key == "ttl":
            parsed = _stoi(raw_value)
            if parsed is None:
                raise ConfigurationError(f'Invalid value for CDC option "ttl": {raw_value}')
            if parsed < 0:
                raise ConfigurationError("Invalid CDC option: ttl must be >= 0")
            ttl_s = parsed
        elif key in ("enable_requested", "tablet_merge_blocked"):
            # internal Alternator keys: accepted, never shown (false values are dropped)
            if not (is_true or is_false):
                raise ConfigurationError(f'Invalid value for CDC option "{key}": {raw_value}')
        else:
            raise ConfigurationError(f"Invalid CDC option: {raw_key}")
    if enabled is None:
        # ScyllaDB serialises an options object without "enabled" as an empty map, so the
        # other keys are validated but do not survive: the table keeps the defaults.
        return CdcOptions()
    return CdcOptions(
        enabled=enabled,
        preimage="true" if preimage == "true" else "full" if preimage == "full" else "false",
        postimage=postimage,
        delta="keys" if delta == "keys" else "full",
        ttl_s=ttl_s,
        enabled_set=True,
    )


def parse_cdc_options(term: Term | None) -> CdcOptions:
    """Parse the value of a ``cdc`` table option (None: the option is absent).

    Raises:
        CqlSyntaxError: the value is not a map of constants.
        ConfigurationError: ScyllaDB's CDC option errors.
    """
    if term is None:
        return CdcOptions()
    return cdc_options_from_map(option_map(term, "cdc"))


__all__ = ["cdc_options_from_map", "option_map", "parse_cdc_options"]
