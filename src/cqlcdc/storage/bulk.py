"""The bulk path: many executions of simple prepared writes, kept as columns end to end.

A prepared INSERT/UPDATE/DELETE that binds every value of atomic columns of one clustering
row (``UPDATE t SET v = ?, w = ? WHERE pk = ? AND ck = ?``) means the same thing for every
binding; only the values change. Executed many times (``Session.execute_many``, ``cqlcdc
load``, the server's concurrent EXECUTEs), its writes travel as a *chunk*: an Arrow table with
a row per write (seq, timestamp, TTL, seed, token, bucket, serialized partition key, bound
values) instead of one encoded ``Partition`` per write (``storage.codec``). A group of up to
``GROUP_CHUNK_MAX`` writes is one chunk whatever buckets it touches (the pipeline splits it
by its bucket column, ``cqlcdc.storage.chunk_groups``); a larger one is a chunk per bucket,
so that an executor task reads only its buckets' share of a bulk load. The pipeline turns
a chunk into base fragments and CDC log rows column-wise (``cqlcdc.cdc.bulk_log``), or, for
tables whose log needs the prior state (images, changefeeds), back into ordinary mutations
(:func:`chunk_mutations`): the same mutations ``build_insert``/``build_update``/
``build_delete`` make, which the tests check.

>>> from cqlcdc.storage.bulk import KIND_UPDATE
>>> KIND_UPDATE
0
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cql import ast
from cqlcdc.errors import CorruptIngestFile
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.base_rows import (
    BUCKET,
    DELETION,
    FRAGMENT,
    MARKER,
    MARKER_TYPE,
    STATIC,
    base_schema,
    cell_type,
    layout,
    storage_type,
)
from cqlcdc.storage.base_rows import PK as BASE_PK
from cqlcdc.storage.base_rows import SEQ as BASE_SEQ
from cqlcdc.storage.base_rows import TOKEN as BASE_TOKEN
from cqlcdc.storage.cells import Cell, RowMarker
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import MAX_KEY_BYTES
from cqlcdc.storage.vectorized import (
    BULK_TYPES,
    VARIABLE_WIDTH,
    binary_parts,
    int_bytes,
    murmur3_tokens,
    native_bytes,
    token_buckets,
)
from cqlcdc.types.arrow import NullColumns

KIND_UPDATE = 0  # cells of the bound columns
KIND_INSERT = 1  # row marker + cells
KIND_ROW_DELETE = 2  # row tombstone
KIND_CELL_DELETE = 3  # tombstones of the named columns

CHUNK_TAG = b"CQB1"  # ingest payload: a chunk of bulk writes (Arrow IPC stream)

# chunk columns besides the bound columns (a leading underscore never starts a CQL name
# unquoted; quoted names that do are not bulk-eligible, see plan_bulk)
SEQ, TS, TTL, SEED, STMT, TOKEN, PK = "_seq", "_ts", "_ttl", "_seed", "_stmt", "_token", "_pk"
BUCKET_OF = "_bucket"  # each write's token bucket (chunks made before it: the record's)
NOW = "_now_us"  # added when chunks are read: the session clock of each write's append
VERSION = "_version"  # added when chunks are split: the schema version of each write's chunk

# The ingest record's bucket for a chunk whose writes fall in more than one bucket: the
# pipeline gives each bucket its share (every executor task reads such records whole).
MIXED_BUCKETS = -1
# Up to this many writes make one chunk whatever buckets they touch: a chunk's fixed cost
# (an Arrow table, an IPC stream, an ingest record, a decode) is paid once per group, not
# once per bucket. A larger group (a bulk load) is a chunk per bucket.
GROUP_CHUNK_MAX = 4096


@dataclass(frozen=True, slots=True)
class BulkStatement:
    """A prepared write the bulk path can run column-wise.

    Attributes:
        kind: what each execution writes (``KIND_*``).
        markers: for each bind marker, in index order, the column it binds.
        columns: the non-key columns written (set, or deleted for ``KIND_CELL_DELETE``).
        timestamp: ``USING TIMESTAMP`` (None: the session clock).
        ttl: ``USING TTL`` or the table's default TTL (0: none).
    """

    kind: int
    markers: tuple[str, ...]
    columns: tuple[str, ...]
    timestamp: int | None
    ttl: int

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "markers": list(self.markers),
            "columns": list(self.columns),
            "timestamp": self.timestamp,
            "ttl": self.ttl,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> BulkStatement:
        return BulkStatement(
            int(d["kind"]),
            tuple(d["markers"]),
            tuple(d["columns"]),
            None if d["timestamp"] is None else int(d["timestamp"]),
            int(d["ttl"]),
        )


def _bulk_column(col: Column | None) -> bool:
    return (
        col is not None
        and col.kind == "regular"
        and col.type.cql_name in BULK_TYPES
        and not col.name.startswith("_")
    )


def _marker(term: ast.Term) -> int | None:
    return term.index if isinstance(term, ast.BindMarker) else None


def _key_markers(schema: TableSchema, where: tuple[ast.Relation, ...]) -> dict[int, str] | None:
    """``pk = ? AND ck = ?`` for exactly every key column, else None."""
    keys = {c.name for c in (*schema.partition_key, *schema.clustering_key)}
    out: dict[int, str] = {}
    for rel in where:
        index = _marker(rel.value)
        if (
            rel.token
            or rel.key is not None
            or rel.operator != "="
            or rel.multi
            or rel.columns[0] not in keys
            or index is None
        ):
            return None
        out[index] = rel.columns[0]
    return out if set(out.values()) == keys and len(out) == len(where) else None


def plan_bulk(
    schema: TableSchema, stmt: ast.Statement, timestamp: int | None, ttl: int
) -> BulkStatement | None:
    """The bulk form of a prepared write, or None when it needs the row-by-row path.

    Args:
        schema: the table written.
        stmt: the parsed statement.
        timestamp, ttl: its ``USING`` clause, evaluated by the row path (TTL with the
            table's default applied).
    """
    key_cols = (*schema.partition_key, *schema.clustering_key)
    if any(c.type.cql_name not in BULK_TYPES or c.name.startswith("_") for c in key_cols):
        return None
    if any(c.type.cql_name == "counter" for c in schema.columns):
        return None
    markers: dict[int, str] = {}
    columns: list[str] = []
    if isinstance(stmt, ast.Insert):
        if stmt.if_not_exists or stmt.json is not None:
            return None
        kind = KIND_INSERT
        for name, term in zip(stmt.columns, stmt.values, strict=True):
            index = _marker(term)
            col = schema.column(name)
            if index is None or col is None or index in markers:
                return None
            markers[index] = name
            if col.kind not in ("partition_key", "clustering"):
                if not _bulk_column(col):
                    return None
                columns.append(name)
        if {c.name for c in key_cols} - set(markers.values()):
            return None
    elif isinstance(stmt, ast.Update):
        if stmt.if_exists or stmt.conditions:
            return None
        kind = KIND_UPDATE
        for assignment in stmt.assignments:
            if not isinstance(assignment, ast.SetColumn):
                return None
            index = _marker(assignment.value)
            if (
                index is None
                or index in markers
                or not _bulk_column(schema.column(assignment.column))
            ):
                return None
            markers[index] = assignment.column
            columns.append(assignment.column)
        keys = _key_markers(schema, stmt.where)
        if keys is None or set(keys) & set(markers):
            return None
        markers.update(keys)
    elif isinstance(stmt, ast.Delete):
        if stmt.if_exists or stmt.conditions or stmt.using.ttl is not None:
            return None
        kind = KIND_CELL_DELETE if stmt.targets else KIND_ROW_DELETE
        for target in stmt.targets:
            if target.key is not None or target.field is not None:
                return None
            if not _bulk_column(schema.column(target.column)):
                return None
            columns.append(target.column)
        keys = _key_markers(schema, stmt.where)
        if keys is None:
            return None
        markers.update(keys)
        ttl = 0
    else:
        return None
    if len(set(columns)) != len(columns) or sorted(markers) != list(range(len(markers))):
        return None
    if kind == KIND_ROW_DELETE and not schema.clustering_key:
        return None  # a partition delete, not a row delete
    return BulkStatement(
        kind, tuple(markers[i] for i in sorted(markers)), tuple(columns), timestamp, ttl
    )


# -- building chunks (session side) ----------------------------------------------------------

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "tinyint": (int,),
    "smallint": (int,),
    "int": (int,),
    "bigint": (int,),
    "timestamp": (int,),
    "float": (float,),
    "double": (float,),
    "text": (str,),
    "ascii": (str,),
    "blob": (bytes,),
    "boolean": (bool,),
}


# the column types whose Python values the bulk path binds as they are
BOUND_TYPES = frozenset(_PY_TYPES)


def bound_columns(
    schema: TableSchema, stmt: BulkStatement, rows: Sequence[object]
) -> dict[str, pa.Array] | None:
    """The bound values of many executions as typed Arrow columns, one per marker.

    None when any value needs the row path's checks to be reported exactly (a wrong Python
    type, out of range, a null key): the caller then runs the rows one by one.
    """
    width = len(stmt.markers)
    if not set(map(type, rows)) <= {tuple, list} or set(map(len, rows)) - {width}:  # type: ignore[arg-type]
        return None
    out: dict[str, pa.Array] = {}
    # one list per marker (itemgetter per column is ~10x faster than zip(*rows) here)
    transposed = [list(map(itemgetter(k), rows)) for k in range(width)]  # type: ignore[arg-type]
    for name, values in zip(stmt.markers, transposed, strict=True):
        col = schema.column(name)
        assert col is not None
        cql = col.type.cql_name
        if not set(map(type, values)) <= {*_PY_TYPES[cql], type(None)}:
            return None
        try:
            array = pa.array(values, col.type.arrow_type())
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
        if cql == "ascii" and not _all_ascii(array):
            return None
        if cql == "float" and _float_overflow(array, pa.array(values, pa.float64())):
            return None
        out[name] = array
    return out


def _float_overflow(array: pa.Array, source: pa.Array) -> bool:
    """Finite values that became infinite as ``float`` (binary32): the row path rejects them."""
    became_inf = pc.and_(pc.is_inf(array), pc.invert(pc.is_inf(source)))
    return bool(pc.any(became_inf, min_count=0).as_py())


def _all_ascii(array: pa.Array) -> bool:
    return bool(pc.all(pc.string_is_ascii(array), min_count=0).as_py())


_FAMILIES: dict[str, Any] = {
    "tinyint": pa.types.is_integer,
    "smallint": pa.types.is_integer,
    "int": pa.types.is_integer,
    "bigint": pa.types.is_integer,
    "float": pa.types.is_floating,
    "double": pa.types.is_floating,
    "text": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "ascii": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "blob": lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
    "boolean": pa.types.is_boolean,
    "timestamp": pa.types.is_timestamp,
}


def _same_family(source: pa.DataType, cql: str) -> bool:
    """Whether Arrow values of ``source`` are the Python values the row path accepts for
    ``cql`` (Arrow's casts would also turn numbers into text and text into numbers)."""
    if pa.types.is_null(source):
        return True
    check = _FAMILIES.get(cql)
    return bool(check is not None and check(source))


def arrow_columns(
    schema: TableSchema, stmt: BulkStatement, table: pa.Table
) -> dict[str, pa.Array] | None:
    """Bound values given as Arrow columns (``cqlcdc load``), cast to the column types.

    None when a value does not convert exactly (the caller takes the row path, which reports
    the first bad row).
    """
    if table.num_columns != len(stmt.markers):
        return None
    out: dict[str, pa.Array] = {}
    for name, values in zip(stmt.markers, table.columns, strict=True):
        col = schema.column(name)
        assert col is not None
        if not _same_family(values.type, col.type.cql_name):
            return None  # e.g. numbers for a text column: the row path rejects them
        try:
            array = values.cast(col.type.arrow_type(), safe=True).combine_chunks()
        except (pa.ArrowException, TypeError, ValueError):
            return None
        if col.type.cql_name == "ascii" and not _all_ascii(array):
            return None
        if col.type.cql_name == "float" and _float_overflow(array, values):
            return None
        out[name] = array
    return out


def serialized_keys(parts: Sequence[Column], columns: Mapping[str, pa.Array]) -> pa.Array:
    """The key of columns ``parts`` of every row as CQL serializes a partition key: one
    component as is, several as a composite (per component a u16 length, the bytes, a zero
    byte). ``serialize_partition_key`` for a partition key; the changefeed partitioner's
    ``primary_key_bytes`` for a primary key."""
    if len(parts) == 1:
        return native_bytes(columns[parts[0].name], parts[0].type.cql_name)
    pieces: list[pa.Array] = []
    for col in parts:
        data = native_bytes(columns[col.name], col.type.cql_name)
        lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
        pieces += [int_bytes(lengths, ">u2"), data, pa.array([b"\x00"] * len(data), pa.binary())]
    return pc.binary_join_element_wise(*pieces, b"")


@dataclass(frozen=True, slots=True)
class ChunkWrites:
    """Many bulk writes of one table, in execution order, before seqs are assigned."""

    statements: tuple[BulkStatement, ...]
    stmt: npt.NDArray[np.int8]  # which statement each write executes
    columns: pa.Table  # the union of the statements' bound columns (null where unbound)
    timestamps: npt.NDArray[np.int64]
    seeds: npt.NDArray[np.uint64]


def keys_usable(schema: TableSchema, columns: pa.Table) -> bool:
    """No null key value and no clustering key over the key length limit (the row path
    reports those with ScyllaDB's messages; empty and oversized partition keys are caught
    by ``make_chunks``)."""
    for col in (*schema.partition_key, *schema.clustering_key):
        if columns.column(col.name).null_count:
            return False
    variable = [c for c in schema.clustering_key if c.type.cql_name in VARIABLE_WIDTH]
    if not variable or not columns.num_rows:
        return True
    return bool(key_lengths(schema.clustering_key, columns).max() <= MAX_KEY_BYTES)


def key_lengths(key: Sequence[Column], columns: pa.Table) -> npt.NDArray[np.int64]:
    """``token.key_length`` of every row's key made of the ``key`` columns."""
    lengths = [
        pc.binary_length(native_bytes(columns.column(c.name), c.type.cql_name))
        .to_numpy(zero_copy_only=False)
        .astype(np.int64)
        for c in key
    ]
    total: npt.NDArray[np.int64] = lengths[0] if len(lengths) == 1 else np.sum(lengths, axis=0)
    return total if len(lengths) == 1 else total + 2 * len(lengths)


def make_chunks(
    schema: TableSchema,
    writes: ChunkWrites,
    first_seq: int,
    now_us: int,
    num_buckets: int,
) -> list[tuple[int, int, int, bytes, bytes]] | None:
    """The chunks of a group of writes, seqs assigned bucket by bucket: one chunk for up
    to ``GROUP_CHUNK_MAX`` writes (its record's bucket ``MIXED_BUCKETS`` when they touch
    more than one), one per bucket for more.

    Writes of one partition keep their execution order (seqs rise with it within a bucket);
    writes to different partitions are independent, so their relative order is free.

    Returns:
        ``(seq, bucket, token, pk, payload)`` per chunk, in seq order (the chunk's seq is its
        last write's, token and pk its first write's), or None when a partition key is empty
        or too long (no chunk for no writes).
    """
    if not writes.columns.num_rows:
        return []
    columns = writes.columns
    keys = serialized_keys(
        schema.partition_key, {n: columns.column(n) for n in columns.column_names}
    )
    parts = len(schema.partition_key)
    # ``key_lengths``: a composite's serialized form has 3 bytes a component, its length 2
    lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False) - (parts if parts > 1 else 0)
    if lengths.max() > MAX_KEY_BYTES or (parts == 1 and lengths.min() == 0):
        return None
    tokens = murmur3_tokens(keys)
    buckets = token_buckets(tokens, num_buckets)
    stmt, timestamps, seeds = writes.stmt, writes.timestamps, writes.seeds
    if (np.diff(buckets) < 0).any():  # not bucket by bucket yet (one write always is)
        order = np.argsort(buckets, kind="stable")
        indices = pa.array(order)
        columns, keys = columns.take(indices), keys.take(indices)
        buckets, tokens = buckets[order], tokens[order]
        stmt, timestamps, seeds = stmt[order], timestamps[order], seeds[order]
    n = len(buckets)
    ttls = np.array([s.ttl for s in writes.statements], np.int32)[stmt]
    table = pa.Table.from_arrays(
        [
            *columns.columns,
            pa.array(np.arange(first_seq, first_seq + n, dtype=np.int64)),
            pa.array(timestamps),
            pa.array(ttls),
            pa.array(seeds.view(np.int64)),
            pa.array(stmt),
            pa.array(tokens),
            pa.array(buckets),
            keys,
        ],
        names=[*columns.column_names, SEQ, TS, TTL, SEED, STMT, TOKEN, BUCKET_OF, PK],
        metadata={
            b"cqlcdc.statements": _statements_json(writes.statements),
            b"cqlcdc.now_us": str(now_us).encode(),
        },
    )
    if n <= GROUP_CHUNK_MAX:
        bounds: list[int] = []
    else:
        bounds = (np.flatnonzero(np.diff(buckets)) + 1).tolist()
    out = []
    for lo, hi in zip([0, *bounds], [*bounds, n], strict=True):
        part = table.slice(lo, hi - lo)
        sink = pa.BufferOutputStream()  # native: a BytesIO sink takes the GIL per write
        sink.write(CHUNK_TAG)
        with pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part)
        bucket = int(buckets[lo])
        out.append(
            (
                first_seq + hi - 1,
                bucket if bucket == buckets[hi - 1] else MIXED_BUCKETS,
                int(tokens[lo]),
                keys[lo].as_py(),
                sink.getvalue().to_pybytes(),
            )
        )
    return out


@functools.lru_cache(maxsize=256)
def _statements_json(statements: tuple[BulkStatement, ...]) -> bytes:
    """A chunk's statements as its metadata holds them (the same few, group after group)."""
    return json.dumps([s.to_json() for s in statements]).encode()


# -- reading chunks (pipeline side) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """A decoded chunk: its writes (one row each) and the statements they execute."""

    table: pa.Table
    statements: tuple[BulkStatement, ...]
    now_us: int


def is_chunk(payload: bytes | pa.Buffer) -> bool:
    head = payload[: len(CHUNK_TAG)]
    return (head.to_pybytes() if isinstance(head, pa.Buffer) else head) == CHUNK_TAG


def chunk_mask(payloads: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """Which ingest payloads are bulk chunks, without copying any into Python."""
    heads = pc.binary_slice(payloads, 0, len(CHUNK_TAG))
    found = pc.equal(heads, pa.scalar(CHUNK_TAG, pa.binary()))
    return np.asarray(found.to_numpy(zero_copy_only=False), np.bool_)


def payload_views(payloads: pa.Array | pa.ChunkedArray) -> list[pa.Buffer]:
    """Each payload as a view of the column's memory: a batch's chunks are most of its
    bytes, and ``to_pylist`` (or ``as_buffer``) would copy every one of them, holding the
    GIL the client needs."""
    arrays = payloads.chunks if isinstance(payloads, pa.ChunkedArray) else [payloads]
    views: list[pa.Buffer] = []
    for array in arrays:  # chunk by chunk: combining them would copy every payload
        offsets, data = binary_parts(array)
        views += [pa.py_buffer(data[a:b]) for a, b in itertools.pairwise(offsets.tolist())]
    return views


def decode_chunk(payload: bytes | pa.Buffer) -> Chunk:
    """Read a chunk payload back (raises CorruptIngestFile on damage)."""
    if not is_chunk(payload):
        raise CorruptIngestFile("ingest payload is not a bulk chunk")
    body = payload if isinstance(payload, pa.Buffer) else pa.py_buffer(payload)
    try:
        with pa.ipc.open_stream(body.slice(len(CHUNK_TAG))) as reader:
            table = reader.read_all()
        meta = table.schema.metadata or {}
        statements = tuple(
            BulkStatement.from_json(s) for s in json.loads(meta[b"cqlcdc.statements"])
        )
        now_us = int(meta[b"cqlcdc.now_us"])
    except (pa.ArrowException, KeyError, ValueError) as err:
        raise CorruptIngestFile(f"damaged bulk chunk in ingest payload: {err}") from err
    return Chunk(table, statements, now_us)


def concat_chunks(chunks: Sequence[Chunk]) -> tuple[pa.Table, tuple[BulkStatement, ...]]:
    """One table of every write of several chunks, statement indexes renumbered."""
    tables = []
    index: dict[BulkStatement, int] = {}
    for chunk in chunks:
        # int16: a batch may hold the chunks of many appends, each with its own statements
        mapping = np.array([index.setdefault(s, len(index)) for s in chunk.statements], np.int16)
        stmt = mapping[chunk.table.column(STMT).to_numpy()]
        table = chunk.table.set_column(
            chunk.table.schema.get_field_index(STMT), STMT, pa.array(stmt)
        )
        now = np.full(table.num_rows, chunk.now_us, np.int64)
        tables.append(table.append_column(NOW, pa.array(now)).replace_schema_metadata())
    merged = pa.concat_tables(tables, promote_options="default")
    return merged, tuple(sorted(index, key=index.__getitem__))


def python_values(table: pa.Table, name: str, schema: TableSchema) -> list[Any]:
    """Column ``name`` of a chunk as the Python values the row path's mutations hold."""
    col = schema.column(name)
    array = table.column(name)
    if col is not None and col.type.cql_name == "timestamp":
        array = array.cast(pa.int64())
    values: list[Any] = array.to_pylist()
    return values


def chunk_mutations(
    schema: TableSchema, table: pa.Table, statements: Sequence[BulkStatement]
) -> list[Partition]:
    """The mutation of every write (row order): what the row path builds for it."""
    n = table.num_rows
    pk_cols = [c.name for c in schema.partition_key]
    ck_cols = [c.name for c in schema.clustering_key]
    needed = {*pk_cols, *ck_cols, *(c for s in statements for c in s.columns)}
    values = {
        name: python_values(table, name, schema) for name in needed if name in table.column_names
    }
    ts = table.column(TS).to_pylist()
    ttl = table.column(TTL).to_pylist()
    which = table.column(STMT).to_pylist()
    now = table.column(NOW).to_pylist()
    out = []
    for i in range(n):
        stmt = statements[which[i]]
        pk = tuple(values[c][i] for c in pk_cols)
        ck = tuple(values[c][i] for c in ck_cols)
        t = ts[i]
        part = Partition(pk)
        row = Row()
        if stmt.kind == KIND_ROW_DELETE:
            row.deletion = t
        elif stmt.kind == KIND_CELL_DELETE:
            for c in stmt.columns:
                row.cells[c] = Cell(t, None)
        else:
            life = ttl[i]
            expiry = now[i] // 1_000_000 + life if life else 0
            if stmt.kind == KIND_INSERT:
                row.marker = RowMarker(t, life, expiry)
            for c in stmt.columns:
                v = values[c][i]
                row.cells[c] = Cell(t, None) if v is None else Cell(t, v, life, expiry)
        part.rows[ck] = row
        out.append(part)
    return out


def bulk_base_columns(
    schema: TableSchema,
    table: pa.Table,
    statements: Sequence[BulkStatement],
    order: npt.NDArray[np.int64] | None = None,
) -> dict[str, pa.Array]:
    """The typed base-row columns of every write (``storage.base_rows``: marker, row
    tombstone, clustering key, one cell per written column), in the writes' order or for
    the writes at positions ``order`` in that order. Each write is one typed row."""
    lay = layout(schema)
    keys = [c.name for c in schema.clustering_key]
    bound = {n for s in statements for n in s.columns}
    wanted = [TS, TTL, NOW, STMT, *keys, *(n for n in bound if n in table.column_names)]
    t = table.select(wanted)
    if order is not None:
        t = t.take(pa.array(order))
    n = t.num_rows
    which = t.column(STMT).to_numpy().astype(np.int64)
    kinds = np.array([s.kind for s in statements], np.int8)[which]
    ts = t.column(TS).to_numpy().astype(np.int64)
    ttl = t.column(TTL).to_numpy().astype(np.int32)
    now_s = t.column(NOW).to_numpy() // 1_000_000
    expiry = np.where(ttl > 0, now_s + ttl, 0).astype(np.int64)
    ts_a, ttl_a, exp_a = pa.array(ts), pa.array(ttl), pa.array(expiry)
    out: dict[str, pa.Array] = {
        MARKER: pa.StructArray.from_arrays(
            [ts_a, ttl_a, exp_a], fields=list(MARKER_TYPE), mask=pa.array(kinds != KIND_INSERT)
        ),
        DELETION: pa.array(ts, mask=kinds != KIND_ROW_DELETE),
    }
    for col, name in lay.keys:
        out[name] = t.column(col.name).combine_chunks().cast(storage_type(col.type))
    zero32, zero64 = pa.array(np.zeros(n, np.int32)), pa.array(np.zeros(n, np.int64))
    for col, name in lay.values:
        arrow_type = storage_type(col.type)
        writes = np.array([col.name in s.columns for s in statements], np.bool_)[which]
        deletes = kinds == KIND_CELL_DELETE
        if col.name in t.column_names and not deletes.all():
            value = t.column(col.name).combine_chunks().cast(arrow_type)
            if deletes.any():
                value = pc.if_else(pa.array(deletes), pa.nulls(n, arrow_type), value)
        else:
            value = pa.nulls(n, arrow_type)
        live = value.is_valid()
        out[name] = pa.StructArray.from_arrays(
            [value, ts_a, pc.if_else(live, ttl_a, zero32), pc.if_else(live, exp_a, zero64)],
            fields=list(cell_type(arrow_type)),
            mask=pa.array(~writes),
        )
    return out


def bulk_base_rows(
    schema: TableSchema, writes: pa.Table, statements: Sequence[BulkStatement], bucket: int
) -> pa.Table:
    """The base rows of bucket ``bucket``'s bulk writes, in token order, as a base file is
    written (a partition read skips row groups by their token statistics): the rows are put
    in it by the take that builds them."""
    tokens = writes.column(TOKEN).to_numpy()
    order = np.argsort(tokens, kind="stable")
    n = writes.num_rows
    arrow = base_schema(schema)
    columns = bulk_base_columns(schema, writes, statements, order)
    columns[BUCKET] = pa.array(np.full(n, bucket, np.int32))
    columns[BASE_PK] = writes.column(PK).take(pa.array(order)).combine_chunks().cast(pa.binary())
    columns[BASE_TOKEN] = pa.array(tokens[order])
    columns[BASE_SEQ] = writes.column(SEQ).take(pa.array(order)).combine_chunks()
    columns[FRAGMENT] = pa.nulls(n, pa.binary())
    columns[STATIC] = pa.array(np.zeros(n, np.bool_))
    nulls = NullColumns(n)  # the columns no statement writes: shared per type
    return pa.Table.from_arrays(
        [columns[f.name] if f.name in columns else nulls(f.type) for f in arrow],
        schema=arrow,
    )
