"""Secondary indexes: ``CREATE INDEX`` checked as ScyllaDB checks it
(``create_index_statement.cc``: its order and messages), the index it defines, and which
index a query's restriction can use.

An index here is part of its table's schema, not a separate structure: a query that uses
it is answered from the base table at the read's snapshot, so the index is never behind
its table and needs no build (``docs/semantics.md``, "Secondary indexes").

>>> index_name_root("t", "v")
't_v_idx'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, IndexKind, SecondaryIndex, TableSchema
from cqlcdc.types import ListType, MapType, SetType, UserType
from cqlcdc.types.base import CqlType

_KIND_NAMES = {"keys": "keys()", "entries": "entries()", "values": "values()", "regular": "value"}


def index_name_root(table: str, column: str | None) -> str:
    """The default name (Cassandra's ``getAvailableIndexName``, before a ``_n`` suffix)."""
    root = f"{table}_{column}_idx" if column else f"{table}_idx"
    return re.sub(r"\W", "", root)


def new_index(
    schema: TableSchema, stmt: ast.CreateIndex, existing_names: Iterable[str]
) -> SecondaryIndex | None:
    """The index ``stmt`` defines on ``schema``; None for IF NOT EXISTS of an existing name.

    Raises:
        InvalidRequest: ScyllaDB's message for the first thing it refuses.
    """
    taken = set(existing_names)
    if stmt.custom_class is not None:
        raise InvalidRequest(
            f"Custom indexes (USING '{stmt.custom_class}') are not supported; create a "
            "regular secondary index"
        )
    if schema.log_of is not None:
        raise InvalidRequest("Secondary indexes are not supported on CDC log tables")
    if any(c.type.is_counter for c in schema.columns):
        raise InvalidRequest("Secondary indexes are not supported on counter tables")
    if schema.compact_storage and schema.clustering_key:
        raise InvalidRequest(
            "Secondary indexes are not supported on COMPACT STORAGE tables that have "
            "clustering columns"
        )
    local_key = _local_key(schema, stmt.targets)
    targets = stmt.targets[1:] if local_key else stmt.targets
    if len(targets) > 1:
        raise InvalidRequest("Only CUSTOM indexes support multiple columns")
    (target,) = targets
    if target.columns:
        raise InvalidRequest(
            "Multi-column index targets are currently only supported for partition key"
        )
    col = schema.column(target.column)
    if col is None:
        raise InvalidRequest(f"No column definition found for column {target.column}")
    if local_key and col.kind == "static":
        raise InvalidRequest("Local indexes containing static columns are not supported.")
    kind = _kind(schema, col, target, bool(local_key))
    name = stmt.name
    if name is not None and name in taken:
        if stmt.if_not_exists:
            return None
        raise InvalidRequest("Index already exists")
    if name is None:
        root = index_name_root(schema.name, col.name)
        name, n = root, 0
        while name in taken:
            n += 1
            name = f"{root}_{n}"
    for index in schema.indexes:
        if (index.column, index.kind, index.local_key) == (col.name, kind, local_key):
            if stmt.if_not_exists:
                return None
            raise InvalidRequest(f"Index {name} is a duplicate of existing index {index.name}")
    return SecondaryIndex(name, col.name, kind, local_key)


def _local_key(schema: TableSchema, targets: tuple[ast.IndexTarget, ...]) -> tuple[str, ...]:
    """``validate_for_local_index``: ``((pk...), col)`` names the whole partition key."""
    if not targets or not targets[0].columns:
        return ()
    expected = [c.name for c in schema.partition_key]
    given = targets[0].columns
    for i, name in enumerate(given):
        col = schema.column(name)
        if col is None or col.kind != "partition_key":
            raise InvalidRequest(
                f"Local index definition must contain full partition key only. Redundant "
                f"column: {name}"
            )
        if i >= len(expected):
            raise InvalidRequest(f"Duplicate column definition in local index: {name}")
        if expected[i] != name:
            break
    else:
        if len(given) >= len(expected):
            if len(targets) == 1:
                raise InvalidRequest(
                    "Local index definition must provide an indexed column, not just partition key"
                )
            return tuple(given)
    missing = next(n for i, n in enumerate(expected) if i >= len(given) or given[i] != n)
    raise InvalidRequest(
        f"Local index definition must contain full partition key only. Missing column: {missing}"
    )


def _kind(schema: TableSchema, col: Column, target: ast.IndexTarget, local: bool) -> IndexKind:
    ctype = col.type
    _check_duration(ctype)
    if col.kind == "partition_key" and len(schema.partition_key) == 1:
        raise InvalidRequest(f"Cannot create secondary index on partition key column {col.name}")
    asked = target.kind
    if ctype.multicell:
        if isinstance(ctype, UserType):
            raise InvalidRequest(f"Cannot create secondary index on UDT column {col.name}")
        if local:
            raise InvalidRequest(
                f"Local secondary index on collection column {col.name} is not implemented yet."
            )
        if asked == "full":
            raise InvalidRequest("full() indexes can only be created on frozen collections")
        if asked in ("keys", "entries"):
            if not isinstance(ctype, MapType):
                raise InvalidRequest(
                    f"Cannot create secondary index on {_KIND_NAMES[asked]} of column "
                    f"{col.name} with non-map type"
                )
            return asked
        # values(c) and c: a set's elements are its keys (ScyllaDB rewrites the target)
        return "keys" if isinstance(ctype, SetType) else "values"
    if isinstance(ctype, ListType | SetType | MapType):  # frozen collections: full() only
        if asked != "full":
            raise InvalidRequest(
                f"Cannot create index on {_KIND_NAMES[asked]} of frozen collection column "
                f"{col.name}"
            )
        return "full"
    if asked == "full":
        raise InvalidRequest("full() indexes can only be created on frozen collections")
    if asked != "regular":
        raise InvalidRequest(
            f"Cannot create index on {_KIND_NAMES[asked]} of column {col.name}; only "
            f"non-frozen collections support {_KIND_NAMES[asked]} indexes"
        )
    return "regular"


def _check_duration(ctype: CqlType) -> None:
    name = ctype.cql_name
    if "duration" not in name:
        return
    if isinstance(ctype, ListType | SetType | MapType):
        raise InvalidRequest(
            "Secondary indexes are not supported on collections containing durations"
        )
    if isinstance(ctype, UserType):
        raise InvalidRequest("Secondary indexes are not supported on UDTs containing durations")
    if name.startswith("frozen<tuple") or name.startswith("tuple"):
        raise InvalidRequest("Secondary indexes are not supported on tuples containing durations")
    raise InvalidRequest("Secondary indexes are not supported on duration columns")


def usable_index(
    schema: TableSchema, column: str, operator: str, has_key: bool
) -> SecondaryIndex | None:
    """The index a restriction ``column operator ...`` can be answered by (``m[k] = v``:
    ``has_key``), if any; a local index needs the partition key restricted too (the caller
    checks)."""
    for index in schema.indexes:
        if index.column != column:
            continue
        if operator == "=" and not has_key and index.kind in ("regular", "full"):
            return index
        if operator == "CONTAINS" and index.kind in ("values", "keys"):
            col = schema.column(column)
            if index.kind == "values" or (col is not None and isinstance(col.type, SetType)):
                return index
        if operator == "CONTAINS KEY" and index.kind == "keys":
            return index
        if operator == "=" and has_key and index.kind == "entries":
            return index
    return None


__all__ = ["index_name_root", "new_index", "usable_index"]
