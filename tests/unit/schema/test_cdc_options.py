"""``cdc = {...}`` parsing: every value and every error, with ScyllaDB's messages."""

from __future__ import annotations

import pytest

from cqlcdc.cql.ast import Constant, FunctionCall, MapLiteral, Term
from cqlcdc.errors import ConfigurationError, CqlSyntaxError
from cqlcdc.schema.cdc_options import cdc_options_from_map, option_map, parse_cdc_options
from cqlcdc.schema.model import CdcOptions


def cdc_map(**entries: Term) -> MapLiteral:
    return MapLiteral(tuple((Constant("string", k), v) for k, v in entries.items()))


def s(text: str) -> Constant:
    return Constant("string", text)


def test_absent_option_gives_defaults() -> None:
    assert parse_cdc_options(None) == CdcOptions()
    assert not CdcOptions().declared


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Constant("boolean", "true"), True),
        (Constant("boolean", "false"), False),
        (s("true"), True),
        (s("TRUE"), True),
        (s("False"), False),
        (s("1"), True),
        (s("0"), False),
        (Constant("integer", "1"), True),
        (Constant("integer", "0"), False),
    ],
)
def test_enabled_values(value: Constant, expected: bool) -> None:
    options = parse_cdc_options(cdc_map(enabled=value))
    assert options.enabled is expected
    assert options.enabled_set and options.declared


@pytest.mark.parametrize("bad", ["yes", "2", "", "tru"])
def test_enabled_invalid(bad: str) -> None:
    with pytest.raises(
        ConfigurationError, match=f'^Invalid value for CDC option "enabled": {bad}$'
    ):
        parse_cdc_options(cdc_map(enabled=s(bad)))


def test_error_shows_value_as_written() -> None:
    with pytest.raises(ConfigurationError, match=r'"enabled": YES$'):
        cdc_options_from_map({"enabled": "YES"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", "true"),
        ("1", "true"),
        ("false", "false"),
        ("0", "false"),
        ("full", "full"),
        ("FULL", "full"),
    ],
)
def test_preimage_values(value: str, expected: str) -> None:
    assert cdc_options_from_map({"enabled": "true", "preimage": value}).preimage == expected


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("false", False)])
def test_postimage_values(value: str, expected: bool) -> None:
    assert cdc_options_from_map({"enabled": "true", "postimage": value}).postimage is expected


@pytest.mark.parametrize(
    ("value", "expected"), [("full", "full"), ("keys", "keys"), ("KEYS", "keys")]
)
def test_delta_values(value: str, expected: str) -> None:
    assert cdc_options_from_map({"enabled": "true", "delta": value}).delta == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [("preimage", "keys"), ("postimage", "full"), ("delta", "true"), ("delta", "1")],
)
def test_invalid_values(key: str, value: str) -> None:
    with pytest.raises(
        ConfigurationError, match=f'^Invalid value for CDC option "{key}": {value}$'
    ):
        cdc_options_from_map({"enabled": "true", key: value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("3600", 3600),
        (" 42", 42),
        ("+7", 7),
        ("12abc", 12),
        ("1.5", 1),
        ("2147483647", 2147483647),
    ],
)
def test_ttl_values_follow_stoi(value: str, expected: int) -> None:
    assert cdc_options_from_map({"enabled": "true", "ttl": value}).ttl_s == expected


@pytest.mark.parametrize("value", ["abc", "", "-", "x1"])
def test_ttl_not_a_number(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r'^Invalid value for CDC option "ttl": '):
        cdc_options_from_map({"enabled": "true", "ttl": value})


@pytest.mark.parametrize("value", ["2147483648", "99999999999999999999999", "-2147483649"])
def test_ttl_too_large(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^Invalid CDC option: ttl too large$"):
        cdc_options_from_map({"enabled": "true", "ttl": value})


def test_ttl_negative() -> None:
    with pytest.raises(ConfigurationError, match=r"^Invalid CDC option: ttl must be >= 0$"):
        cdc_options_from_map({"enabled": "true", "ttl": "-1"})


def test_unknown_key_keeps_its_case() -> None:
    with pytest.raises(ConfigurationError, match=r"^Invalid CDC option: PreImages$"):
        cdc_options_from_map({"PreImages": "true"})


def test_keys_are_case_insensitive() -> None:
    options = cdc_options_from_map({"ENABLED": "true", "PreImage": "Full", "TTL": "5"})
    assert (options.enabled, options.preimage, options.ttl_s) == (True, "full", 5)


def test_internal_keys_accepted() -> None:
    assert cdc_options_from_map({"enabled": "true", "enable_requested": "false"}).enabled
    with pytest.raises(ConfigurationError, match='"tablet_merge_blocked": x'):
        cdc_options_from_map({"tablet_merge_blocked": "x"})


def test_without_enabled_nothing_survives() -> None:
    # cdc::options::to_map() is empty without "enabled": the table keeps the defaults
    options = cdc_options_from_map({"preimage": "true", "ttl": "5"})
    assert options == CdcOptions()
    assert not options.enabled_set


def test_without_enabled_values_are_still_checked() -> None:
    with pytest.raises(ConfigurationError, match='"preimage": nope'):
        cdc_options_from_map({"preimage": "nope"})


def test_full_map_and_as_map() -> None:
    options = parse_cdc_options(
        cdc_map(
            enabled=Constant("boolean", "true"),
            preimage=s("full"),
            postimage=Constant("boolean", "true"),
            delta=s("keys"),
            ttl=Constant("integer", "600"),
        )
    )
    assert options.as_map() == {
        "delta": "keys",
        "enabled": "true",
        "postimage": "true",
        "preimage": "full",
        "ttl": "600",
    }


def test_map_must_hold_constants() -> None:
    with pytest.raises(CqlSyntaxError, match="should be a map"):
        parse_cdc_options(s("enabled"))
    with pytest.raises(CqlSyntaxError, match="Invalid property value"):
        parse_cdc_options(cdc_map(enabled=FunctionCall("now", ())))
    with pytest.raises(CqlSyntaxError, match="Multiple definition for property enabled"):
        option_map(MapLiteral(((s("enabled"), s("true")), (s("enabled"), s("false")))), "cdc")
