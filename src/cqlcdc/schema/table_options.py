"""Table properties other than ``cdc``: validation, DESCRIBE text, ScyllaDB's defaults.

A table keeps only the properties set on it (name -> DESCRIBE text); DESCRIBE merges them
over the defaults, in ScyllaDB's print order.

>>> validate_table_options((("comment", Constant("string", "it's")),))
(('comment', "'it''s'"),)
"""

from __future__ import annotations

import math
import re
import uuid

from cqlcdc.cql.ast import Constant, OptionValue
from cqlcdc.errors import ConfigurationError, CqlSyntaxError, InvalidRequest
from cqlcdc.schema.cdc_options import option_map

# schema::schema_properties print order (then the extensions, sorted by name)
DEFAULT_TABLE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("bloom_filter_fp_chance", "0.01"),
    ("caching", "{'keys': 'ALL', 'rows_per_partition': 'ALL'}"),
    ("comment", "''"),
    ("compaction", "{'class': 'SizeTieredCompactionStrategy'}"),
    ("compression", "{'sstable_compression': 'LZ4WithDictsCompressor'}"),
    ("crc_check_chance", "1"),
    ("default_time_to_live", "0"),
    ("gc_grace_seconds", "864000"),
    ("max_index_interval", "2048"),
    ("memtable_flush_period_in_ms", "0"),
    ("min_index_interval", "128"),
    ("speculative_retry", "'99.0PERCENTILE'"),
)
# extensions: printed only when set, except tombstone_gc (a default is always attached)
EXTENSION_OPTIONS = ("paxos_grace_seconds", "tombstone_gc")
DEFAULT_TOMBSTONE_GC = "{'mode': 'timeout', 'propagation_delay_in_seconds': '3600'}"

_INT_OPTIONS = frozenset(
    {
        "default_time_to_live",
        "gc_grace_seconds",
        "max_index_interval",
        "memtable_flush_period_in_ms",
        "min_index_interval",
        "paxos_grace_seconds",
    }
)
_DOUBLE_OPTIONS = frozenset({"bloom_filter_fp_chance", "crc_check_chance"})
_STRING_OPTIONS = frozenset({"comment", "speculative_retry"})
_MAP_OPTIONS = frozenset({"caching", "compaction", "compression", "tombstone_gc"})
_OBSOLETE_OPTIONS = frozenset(
    {
        "index_interval",
        "replicate_on_write",
        "populate_io_cache_on_flush",
        "read_repair_chance",
        "dclocal_read_repair_chance",
    }
)
# cf_prop_defs::validate_minimum_int: (minimum, default) of the options it checks
_MINIMUM_INT_OPTIONS = {"default_time_to_live": (0, 0), "paxos_grace_seconds": (0, 864000)}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_COMPACTION_PREFIX = "org.apache.cassandra.db.compaction."
_LOG_CACHING = "{'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}"


def single_quote(text: str) -> str:
    """``cql3::util::single_quote``: a CQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def format_double(value: float) -> str:
    """A double as ``fmt::to_string`` prints it (``1.0`` -> ``1``)."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def format_map(entries: dict[str, str], first: str | None = None) -> str:
    """``{'k': 'v', ...}`` sorted by key (``map_as_cql_param``), ``first`` key leading."""
    keys = sorted(entries)
    if first is not None and first in entries:
        keys.remove(first)
        keys.insert(0, first)
    return "{" + ", ".join(f"'{k}': '{entries[k]}'" for k in keys) + "}"


def _constant(name: str, value: OptionValue, kind: str) -> str:
    if not isinstance(value, Constant):
        raise CqlSyntaxError(f"Invalid value for property '{name}'. It should be a {kind}")
    return value.text


def _format_option(name: str, value: OptionValue) -> str:
    if name in _MAP_OPTIONS:
        entries = option_map(value, name)
        if name == "compaction":
            if "class" not in entries:
                raise ConfigurationError("Missing sub-option 'class' for the 'compaction' option.")
            entries["class"] = entries["class"].removeprefix(_COMPACTION_PREFIX)
            return format_map(entries, first="class")
        if name == "compression" and entries and "sstable_compression" not in entries:
            raise ConfigurationError(
                "Missing sub-option 'sstable_compression' for the 'compression' option."
            )
        return format_map(entries)
    text = _constant(name, value, "string")
    if name == "speculative_retry":
        return single_quote(speculative_retry(text))
    if name in _STRING_OPTIONS:
        return single_quote(text)
    if name in _INT_OPTIONS:
        try:
            value_int = int(text)
        except ValueError:
            value_int = None
        # std::stoi: a value that is not a 32-bit int is a syntax error
        if value_int is None or not _INT32_MIN <= value_int <= _INT32_MAX:
            raise CqlSyntaxError(f"Invalid integer value {text} for '{name}'")
        return str(value_int)
    try:
        return format_double(float(text))
    except ValueError:
        raise CqlSyntaxError(f"Invalid double value {text} for '{name}'") from None


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:E[+-]?\d+)?|[+-]?(?:NAN|INF|INFINITY)")


def speculative_retry(text: str) -> str:
    """``speculative_retry::from_sstring`` then ``to_sstring``: the canonical form of
    ``NONE``, ``ALWAYS``, ``Xms`` or ``YPERCENTILE`` (any case).

    Raises:
        ConfigurationError: another form, or a number out of range (ScyllaDB's messages).
    """
    upper = text.upper()
    if upper in ("NONE", "ALWAYS"):
        return upper
    for suffix in ("MS", "PERCENTILE"):
        if upper.endswith(suffix):
            number = upper[: -len(suffix)]
            if not _NUMBER.fullmatch(number):
                break
            v = float(number)
            if suffix == "MS":
                if not math.isfinite(v) or v < 0:
                    raise ConfigurationError(
                        f"Invalid value {upper} for option 'speculative_retry': the number of "
                        "milliseconds must be non-negative and finite"
                    )
                return f"{v:.2f}ms"
            fraction = v / 100  # stored as a fraction, printed back as ScyllaDB prints it
            if not math.isfinite(fraction) or not 0.0 <= fraction <= 1.0:
                raise ConfigurationError(
                    f"Invalid value {upper} for PERCENTILE option 'speculative_retry': must be "
                    "between [0.0 and 100.0]"
                )
            return f"{100 * fraction:.1f}PERCENTILE"
    raise ConfigurationError(f"cannot convert {upper} to speculative_retry")


def _check_table_id(value: OptionValue) -> None:
    """``WITH ID = <uuid>``: validated as ScyllaDB validates it (``cf_prop_defs::get_id``)."""
    try:
        uuid.UUID(_constant("id", value, "string"))
    except ValueError:
        raise ConfigurationError("Invalid table id") from None


def validate_table_options(
    options: tuple[tuple[str, OptionValue], ...], *, altering: bool = False
) -> tuple[tuple[str, str], ...]:
    """The ``WITH`` options other than ``cdc``, validated, as (name, DESCRIBE text).

    Args:
        options: the options as parsed.
        altering: they come from ``ALTER TABLE ... WITH`` (a table id cannot change).

    Raises:
        CqlSyntaxError: an unknown property or a malformed value (ScyllaDB's messages).
        ConfigurationError: a map option missing its mandatory sub-option, a value out of
            its range (a negative ``default_time_to_live`` would make every write expire as
            it is acknowledged), an invalid table id or an ALTER of it.
        InvalidRequest: an option not allowed on a base table.
    """
    result: dict[str, str] = {}
    table_id: OptionValue | None = None
    for name, value in options:
        if name == "cdc" or name in _OBSOLETE_OPTIONS:
            continue
        if name == "synchronous_updates":
            raise InvalidRequest(
                "The synchronous_updates option is only applicable to materialized views, "
                "not to base tables"
            )
        if name == "id":
            table_id = value
            continue
        if name not in _INT_OPTIONS | _DOUBLE_OPTIONS | _STRING_OPTIONS | _MAP_OPTIONS:
            raise CqlSyntaxError(f"Unknown property '{name}'")
        if name in result:
            raise CqlSyntaxError(f"Multiple definition for property '{name}'")
        result[name] = _format_option(name, value)
    if table_id is not None:
        # CREATE TABLE ... WITH ID restores a table id for SSTables; our ids are our own
        _check_table_id(table_id)
    for name, (minimum, default) in _MINIMUM_INT_OPTIONS.items():
        if int(result.get(name, default)) < minimum:
            raise ConfigurationError(
                f"{name} cannot be smaller than {minimum}, (default {default})"
            )
    min_index_interval = int(result.get("min_index_interval", "128"))
    if min_index_interval <= 0:
        raise ConfigurationError("min_index_interval must be greater than 0")
    if int(result.get("max_index_interval", "2048")) < min_index_interval:
        raise ConfigurationError("max_index_interval must be greater than min_index_interval")
    if altering and table_id is not None:
        raise ConfigurationError("Cannot alter table id.")
    return tuple(result.items())


def merge_options(
    current: tuple[tuple[str, str], ...], changes: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """ALTER TABLE ... WITH: the named options replace their old values, the rest stay."""
    merged = dict(current)
    merged.update(changes)
    return tuple(merged.items())


def log_table_options(keyspace: str, base: str, ttl_s: int) -> tuple[tuple[str, str], ...]:
    """The properties a new CDC log table gets (``set_default_properties_log_table``)."""
    options = [
        ("caching", _LOG_CACHING),
        ("comment", single_quote(f"CDC log for {keyspace}.{base}")),
    ]
    if ttl_s > 0:
        window_s = -(-ttl_s // 24)  # at most 24 sstables over the TTL
        window_min = -(-window_s // 60)
        compaction = {
            "class": "TimeWindowCompactionStrategy",
            "compaction_window_size": str(window_min),
            "compaction_window_unit": "MINUTES",
            "expired_sstable_check_frequency_seconds": str(max(1, window_s // 2)),
        }
        options.append(("compaction", format_map(compaction, first="class")))
        options.append(("gc_grace_seconds", "0"))
    else:
        options.append(("compaction", "{'class': 'TimeWindowCompactionStrategy'}"))
    return tuple(options)


def describe_options(options: tuple[tuple[str, str], ...], cdc_text: str | None) -> list[str]:
    """``name = text`` lines in DESCRIBE order: the defaults overridden, then the extensions."""
    values = dict(options)
    lines = [f"{name} = {values.get(name, default)}" for name, default in DEFAULT_TABLE_OPTIONS]
    extensions: dict[str, str] = {"tombstone_gc": values.get("tombstone_gc", DEFAULT_TOMBSTONE_GC)}
    if "paxos_grace_seconds" in values:
        extensions["paxos_grace_seconds"] = values["paxos_grace_seconds"]
    if cdc_text is not None:
        extensions["cdc"] = cdc_text
    lines.extend(f"{name} = {extensions[name]}" for name in sorted(extensions))
    return lines


def default_ttl_s(options: tuple[tuple[str, str], ...]) -> int:
    """The table's ``default_time_to_live`` in seconds (0: none)."""
    return int(dict(options).get("default_time_to_live", "0"))


__all__ = [
    "DEFAULT_TABLE_OPTIONS",
    "default_ttl_s",
    "describe_options",
    "format_map",
    "log_table_options",
    "merge_options",
    "single_quote",
    "validate_table_options",
]
