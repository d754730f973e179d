"""Text helpers shared by the type classes: cqlsh's escaping and float printing, CQL quoting.

cqlsh (``pylib/cqlshlib/formatting.py``) doubles backslashes, shows control characters as
Python escapes and, inside collections, quotes strings with ``'`` doubled.

>>> format_text("it's", quote=True)
"'it''s'"
>>> format_float(0.1, 12)
'0.1'
"""

from __future__ import annotations

import math
import re
import sys

FLOAT_PRECISION = 5  # cqlsh's default display precision for float (and nested values)
DOUBLE_PRECISION = 12  # cqlsh's default display precision for a double column

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\xa0]")
_UNQUOTED_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]*$")

# Reserved CQL keywords: an identifier spelled like one must be double-quoted.
RESERVED_KEYWORDS = frozenset(
    [
        "add",
        "allow",
        "alter",
        "and",
        "ann",
        "apply",
        "asc",
        "authorize",
        "batch",
        "begin",
        "by",
        "cast",
        "columnfamily",
        "concurrency",
        "create",
        "default",
        "delete",
        "drop",
        "entries",
        "from",
        "full",
        "grant",
        "if",
        "in",
        "index",
        "infinity",
        "insert",
        "into",
        "is",
        "keyspace",
        "limit",
        "materialized",
        "modify",
        "nan",
        "norecursive",
        "not",
        "null",
        "of",
        "on",
        "or",
        "order",
        "primary",
        "rename",
        "replace",
        "revoke",
        "schema",
        "scylla_clustering_bound",
        "scylla_counter_shard_list",
        "scylla_timeuuid_list_index",
        "select",
        "set",
        "table",
        "text_search_indexing",
        "to",
        "token",
        "truncate",
        "unlogged",
        "unset",
        "update",
        "use",
        "using",
        "vector_search_indexing",
        "view",
        "where",
        "with",
    ]
)


def _show_control_char(match: re.Match[str]) -> str:
    return repr(match.group(0))[1:-1]


def format_text(value: str, quote: bool) -> str:
    """A text value as cqlsh prints it (``quote`` inside collections, UDTs and tuples)."""
    escaped = value.replace("\\", "\\\\")
    if quote:
        escaped = escaped.replace("'", "''")
    escaped = _CONTROL_CHARS.sub(_show_control_char, escaped)
    return f"'{escaped}'" if quote else escaped


def format_float(value: float, precision: int) -> str:
    """cqlsh's ``format_floating_point_type`` (``%g`` with precision widened for |x| >= 1)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if abs(value) > sys.float_info.epsilon:
        exponent = int(math.log10(abs(value)))
        if -4 <= exponent < precision:
            precision = precision + exponent + 1
    return f"{value:.{precision}g}"


def float_literal(value: float) -> str:
    """A CQL float literal that reads back to exactly ``value`` (``NaN``, ``-Infinity``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    return text if any(c in text for c in ".en") else text + ".0"


def quote_string(value: str) -> str:
    """A CQL string literal: single quotes, embedded quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def maybe_quote(name: str) -> str:
    """An identifier as CQL prints it: bare when it reads back the same, else double-quoted."""
    if _UNQUOTED_IDENTIFIER.match(name) and name not in RESERVED_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


__all__ = [
    "DOUBLE_PRECISION",
    "FLOAT_PRECISION",
    "RESERVED_KEYWORDS",
    "float_literal",
    "format_float",
    "format_text",
    "maybe_quote",
    "quote_string",
]
