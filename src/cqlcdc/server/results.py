"""RESULT messages (spec 4.2.5): Void, Rows, Set_keyspace, Prepared, Schema_change.

Cells are ``[bytes]`` already in the native encoding, which is what ``CqlType.serialize``
gives (``serialize_rows`` does it for Python values); column types are cqlcdc types,
written as ``[option]`` by ``typecodes``.

>>> from cqlcdc.types import native_type
>>> cols = (ColumnSpec("ks", "t", "v", native_type("int")),)
>>> RowsResult(RowsMetadata(cols), serialize_rows(cols, [(1,), (None,)])).rows
((b'\\x00\\x00\\x00\\x01',), (None,))
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from cqlcdc.server.frames import Opcode
from cqlcdc.server.notations import (
    write_bytes,
    write_int,
    write_short,
    write_short_bytes,
    write_string,
    write_string_list,
)
from cqlcdc.server.typecodes import type_option
from cqlcdc.types.base import CqlType

VOID = 0x0001
ROWS = 0x0002
SET_KEYSPACE = 0x0003
PREPARED = 0x0004
SCHEMA_CHANGE = 0x0005

GLOBAL_TABLES_SPEC = 0x0001
HAS_MORE_PAGES = 0x0002
NO_METADATA = 0x0004
METADATA_CHANGED = 0x0008  # v5

CHANGE_TYPES = frozenset({"CREATED", "UPDATED", "DROPPED"})
TARGETS = frozenset({"KEYSPACE", "TABLE", "TYPE", "FUNCTION", "AGGREGATE"})


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """A result column or a bind marker: its table, its name and its type."""

    keyspace: str
    table: str
    name: str
    type: CqlType


def metadata_id(columns: Sequence[ColumnSpec]) -> bytes:
    """A digest of result columns (v5's result metadata id, as Cassandra's MD5 of them): a
    client sends it back in EXECUTE, and when it is stale the Rows answer carries the new
    columns with Metadata_changed."""
    digest = hashlib.md5(usedforsecurity=False)
    for c in columns:
        for part in (c.keyspace, c.table, c.name):
            digest.update(part.encode() + b"\x00")
        digest.update(type_option(c.type))
    return digest.digest()


def serialize_rows(
    columns: Sequence[ColumnSpec], rows: Iterable[Sequence[Any]]
) -> tuple[tuple[bytes | None, ...], ...]:
    """Python values -> cells, each by its column's type (None stays null)."""
    types = [c.type for c in columns]
    return tuple(
        tuple(None if v is None else t.serialize(v) for v, t in zip(row, types, strict=True))
        for row in rows
    )


@dataclass(frozen=True, slots=True)
class RowsMetadata:
    """The ``<metadata>`` of a Rows result.

    Attributes:
        columns: the result columns (with ``no_metadata`` only their count is sent).
        paging_state: set when more pages follow (Has_more_pages).
        no_metadata: leave out the column specs (the client asked, with Skip_metadata,
            and knows them from PREPARE).
        new_metadata_id: v5 only: the columns changed since the client's result metadata
            id; sent with the specs (Metadata_changed), so ``no_metadata`` must be False.
    """

    columns: tuple[ColumnSpec, ...]
    paging_state: bytes | None = None
    no_metadata: bool = False
    new_metadata_id: bytes | None = None

    def __post_init__(self) -> None:
        if self.no_metadata and self.new_metadata_id is not None:
            raise ValueError("Metadata_changed requires the metadata (no_metadata=False)")

    def write(self, out: io.BytesIO, version: int) -> None:
        changed = self.new_metadata_id is not None and version >= 5
        flags = (
            (HAS_MORE_PAGES if self.paging_state is not None else 0)
            | (NO_METADATA if self.no_metadata else 0)
            | (METADATA_CHANGED if changed else 0)
        )
        same = _same_table(self.columns) and not self.no_metadata
        write_int(out, flags | (GLOBAL_TABLES_SPEC if same else 0))
        write_int(out, len(self.columns))
        if self.paging_state is not None:
            write_bytes(out, self.paging_state)
        if self.no_metadata:
            return
        if changed:
            assert self.new_metadata_id is not None
            write_short_bytes(out, self.new_metadata_id)
        _write_specs(out, self.columns, same)


def _same_table(columns: Sequence[ColumnSpec]) -> bool:
    return bool(columns) and all(
        (c.keyspace, c.table) == (columns[0].keyspace, columns[0].table) for c in columns
    )


def _write_specs(out: io.BytesIO, columns: Sequence[ColumnSpec], same_table: bool) -> None:
    if same_table:
        write_string(out, columns[0].keyspace)
        write_string(out, columns[0].table)
    for c in columns:
        if not same_table:
            write_string(out, c.keyspace)
            write_string(out, c.table)
        write_string(out, c.name)
        out.write(type_option(c.type))


@dataclass(frozen=True, slots=True)
class VoidResult:
    opcode: ClassVar[int] = Opcode.RESULT

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, VOID)


@dataclass(frozen=True, slots=True)
class RowsResult:
    """Rows: metadata, then each row's cells (``None`` is null, ``b""`` an empty value)."""

    opcode: ClassVar[int] = Opcode.RESULT
    metadata: RowsMetadata
    rows: tuple[tuple[bytes | None, ...], ...] = ()

    def __post_init__(self) -> None:
        width = len(self.metadata.columns)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"a row of {len(row)} cells for {width} columns")

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, ROWS)
        self.metadata.write(out, version)
        write_int(out, len(self.rows))
        for row in self.rows:
            for cell in row:
                write_bytes(out, cell)


@dataclass(frozen=True, slots=True)
class EncodedRowsResult:
    """Rows whose cells are already encoded (``server.column_cells``): ``count`` rows,
    ``body`` their cells one after another, each ``[int length][bytes]``."""

    opcode: ClassVar[int] = Opcode.RESULT
    metadata: RowsMetadata
    count: int
    body: bytes

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, ROWS)
        self.metadata.write(out, version)
        write_int(out, self.count)
        out.write(self.body)


@dataclass(frozen=True, slots=True)
class SetKeyspaceResult:
    opcode: ClassVar[int] = Opcode.RESULT
    keyspace: str

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, SET_KEYSPACE)
        write_string(out, self.keyspace)


@dataclass(frozen=True, slots=True)
class PreparedResult:
    """Prepared: the statement id, the bind markers (with the indexes of the markers that
    bind the partition key, in key order, for token-aware routing; empty when some key
    column has no plain marker) and the result columns (empty for anything but SELECT).

    ``result_metadata_id`` (v5) defaults to ``metadata_id(result)``.
    """

    opcode: ClassVar[int] = Opcode.RESULT
    query_id: bytes
    binds: tuple[ColumnSpec, ...] = ()
    pk_indexes: tuple[int, ...] = ()
    result: tuple[ColumnSpec, ...] = ()
    result_metadata_id: bytes | None = None

    def __post_init__(self) -> None:
        for index in self.pk_indexes:
            if not 0 <= index < len(self.binds):
                raise ValueError(f"pk index {index} is not a bind marker")

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, PREPARED)
        write_short_bytes(out, self.query_id)
        if version >= 5:
            meta_id = self.result_metadata_id
            write_short_bytes(out, metadata_id(self.result) if meta_id is None else meta_id)
        same = _same_table(self.binds)
        write_int(out, GLOBAL_TABLES_SPEC if same else 0)
        write_int(out, len(self.binds))
        write_int(out, len(self.pk_indexes))
        for index in self.pk_indexes:
            write_short(out, index)
        _write_specs(out, self.binds, same)
        RowsMetadata(self.result, no_metadata=not self.result).write(out, version)


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What a DDL statement changed: the body of a Schema_change result and of a
    SCHEMA_CHANGE event. ``name`` is empty for a keyspace; ``arg_types`` (CQL type names)
    are for functions and aggregates."""

    change_type: str
    target: str
    keyspace: str
    name: str = ""
    arg_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.change_type not in CHANGE_TYPES or self.target not in TARGETS:
            raise ValueError(f"no schema change {self.change_type} {self.target}")

    def write(self, out: io.BytesIO) -> None:
        write_string(out, self.change_type)
        write_string(out, self.target)
        write_string(out, self.keyspace)
        if self.target != "KEYSPACE":
            write_string(out, self.name)
        if self.target in ("FUNCTION", "AGGREGATE"):
            write_string_list(out, list(self.arg_types))


@dataclass(frozen=True, slots=True)
class SchemaChangeResult:
    opcode: ClassVar[int] = Opcode.RESULT
    change: SchemaChange

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, SCHEMA_CHANGE)
        self.change.write(out)


Result = (
    VoidResult
    | RowsResult
    | EncodedRowsResult
    | SetKeyspaceResult
    | PreparedResult
    | SchemaChangeResult
)

__all__ = [
    "ColumnSpec",
    "EncodedRowsResult",
    "PreparedResult",
    "Result",
    "RowsMetadata",
    "RowsResult",
    "SchemaChange",
    "SchemaChangeResult",
    "SetKeyspaceResult",
    "VoidResult",
    "metadata_id",
    "serialize_rows",
]
