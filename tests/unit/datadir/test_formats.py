"""The durable byte formats, pinned by golden fixtures (``golden_formats.json``).

Base rows and ingest payloads live in data directories for as long as the data does, so a
change to their layout (a field reordered in a payload, a base-row column renamed or
retyped) must be a decision, not an accident: each fixture is what a write of this version
encodes to (bytes, or base rows as JSON with their schema). The tests decode every fixture
(an old directory stays readable) and encode the same write again to the same form (nothing
drifted). When a format changes on purpose, bump its tag (``CQP1``, ``CQW1``, ``CQB1``) or
the base-row layout, and ``store.commit.FORMAT``, and run
``python -m tests.unit.datadir.test_formats`` to write the new fixtures.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.datadir.records import IngestRecord, records_to_arrow
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import CorruptIngestFile
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import base_schema, partitions, row_partitions, write_rows
from cqlcdc.storage.bulk import (
    BUCKET_OF,
    VERSION,
    ChunkWrites,
    bound_columns,
    bulk_base_rows,
    chunk_mask,
    chunk_mutations,
    concat_chunks,
    decode_chunk,
    make_chunks,
    payload_views,
    plan_bulk,
)
from cqlcdc.storage.chunk_groups import split_chunks
from cqlcdc.storage.codec import (
    ConditionalWrite,
    Payload,
    ScanRequest,
    SweepRequest,
    TickRequest,
    WritePayload,
    decode_fragment,
    decode_payload,
    encode_fragment,
    encode_payload,
)
from cqlcdc.storage.mutations import (
    Mutation,
    WriteContext,
)
from cqlcdc.storage.token import serialize_partition_key
from cqlcdc.writes import plan_write
from tests.bulk_writes import row_mutation

GOLDEN = Path(__file__).with_name("golden_formats.json")
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck text, v int, w text, m timestamp, b blob, d double, "
    "o boolean, s int static, l list<int>, z set<text>, mm map<int, text>, PRIMARY KEY (pk, ck))"
)
NOW_US = 1_700_000_000_123_456
SEED = 42
ROW_WRITES = [
    (
        "INSERT INTO ks.t (pk, ck, v, w, m, b, d, o, l, z, mm) VALUES (1, 'a', 7, 'x', 1000, "
        "0x0102, 1.5, true, [1, 2], {'p', 'q'}, {3: 'c'}) USING TTL 60",
        100,
    ),
    (
        "UPDATE ks.t SET s = 9, l = l + [3], z = z - {'p'}, mm[4] = 'd' WHERE pk = 1 AND ck = 'a'",
        101,
    ),
    ("UPDATE ks.t SET l[0] = 5 WHERE pk = 1 AND ck = 'a'", 102),
    ("DELETE FROM ks.t WHERE pk = 1 AND ck > 'b' AND ck <= 'd'", 103),
    ("DELETE w FROM ks.t WHERE pk = 1 AND ck = 'a'", 104),
    ("DELETE FROM ks.t WHERE pk = 2", 105),
]
CONDITIONAL_WRITES = [  # lightweight transactions: the write and its conditions
    "UPDATE ks.t SET v = 8, l[1] = 4 WHERE pk = 1 AND ck = 'a' "
    "IF v IN (7, null) AND mm[3] = 'c' AND z CONTAINS 'q' AND d > 1.0",
    "INSERT INTO ks.t (pk, ck, v) VALUES (3, 'c', 1) IF NOT EXISTS",
    "BEGIN BATCH UPDATE ks.t SET s = 1 WHERE pk = 1 IF s = null "
    "UPDATE ks.t SET w = 'z' WHERE pk = 1 AND ck = 'b' APPLY BATCH",
    "UPDATE ks.t SET v = v + 2, d = d - 0.5 WHERE pk = 1 AND ck = 'a' IF EXISTS",  # arithmetic
]
OTHER_PAYLOADS: list[Payload] = [
    ScanRequest("feed", 1_700_000_000_000, 7, 1_700_000_000_001),
    SweepRequest(1_700_000_060),
    TickRequest(1_700_000_000_123),
]
BULK_WRITES = [  # (prepared statement, its bound values per execution)
    (
        "INSERT INTO ks.t (pk, ck, v, w, m, b, d, o) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL 9",
        [
            (1, "a", 7, "x", 1000, b"\x01", 1.5, True),
            (2, "b", None, None, None, None, None, None),
        ],
    ),
    ("UPDATE ks.t SET v = ?, w = ? WHERE pk = ? AND ck = ?", [(3, "y", 1, "a")]),
    ("DELETE FROM ks.t WHERE pk = ? AND ck = ?", [(1, "c")]),
    ("DELETE v, o FROM ks.t WHERE pk = ? AND ck = ?", [(2, "b")]),
]


def _schema() -> TableSchema:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement(TABLE), None)
    schema = catalog.table("ks", "t")
    assert schema is not None
    return schema


def _row_write(schema: TableSchema, text: str, ts: int) -> Mutation:
    return row_mutation(schema, parse_statement(text), WriteContext(ts, NOW_US, SEED))


def _payload(mutation: Mutation) -> WritePayload:
    return WritePayload(mutation.partition, tuple(mutation.list_ops), NOW_US, SEED)


def _conditional(schema: TableSchema, text: str) -> ConditionalWrite:
    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch)
    plan = plan_write(lambda _: schema, stmt, WriteContext(200, NOW_US, SEED))
    assert plan.condition is not None and len(plan.mutations) == 1, text
    return ConditionalWrite(_payload(plan.mutations[0]), plan.condition)


def _bulk(schema: TableSchema) -> tuple[pa.Table, Any, bytes, pa.Table]:
    """The bulk writes as one chunk (its payload bytes) and their base rows."""
    plans = []
    for text, _ in BULK_WRITES:
        stmt = parse_statement(text)
        assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
        plan = plan_bulk(schema, stmt, None, 9 if "TTL" in text else 0)
        assert plan is not None, text
        plans.append(plan)
    which = [i for i, (_, rows) in enumerate(BULK_WRITES) for _ in rows]
    params = [row for _, rows in BULK_WRITES for row in rows]
    tables = []
    for i, plan in enumerate(plans):
        columns = bound_columns(schema, plan, [p for w, p in zip(which, params) if w == i])
        assert columns is not None
        tables.append(pa.table(columns))
    merged = pa.concat_tables(tables, promote_options="default")  # writes grouped by statement
    n = merged.num_rows
    writes = ChunkWrites(
        tuple(plans),
        np.array(which, np.int8),
        merged,
        np.arange(500, 500 + n, dtype=np.int64),
        np.arange(1, n + 1, dtype=np.uint64),
    )
    chunks = make_chunks(schema, writes, 10, NOW_US, 1)
    assert chunks is not None and len(chunks) == 1
    payload = chunks[0][4]
    table, statements = concat_chunks([decode_chunk(payload)])
    return table, statements, payload, bulk_base_rows(schema, table, statements, 0)


def _jsonable(value: Any) -> Any:
    """Base rows as JSON: bytes as hex, recursively."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _rows_json(rows: pa.Table) -> dict[str, Any]:
    return {"schema": str(rows.schema), "rows": _jsonable(rows.to_pylist())}


def _rows_from_json(schema: TableSchema, data: dict[str, Any]) -> pa.Table:
    arrow = base_schema(schema)

    def unhex(value: Any, t: pa.DataType) -> Any:
        if value is None:
            return None
        if pa.types.is_binary(t):
            return bytes.fromhex(value)
        if pa.types.is_struct(t):
            return {f.name: unhex(value[f.name], f.type) for f in t}
        if pa.types.is_list(t):
            return [unhex(v, t.value_type) for v in value]
        return value

    rows = [{f.name: unhex(r[f.name], f.type) for f in arrow} for r in data["rows"]]
    return pa.Table.from_pylist(rows, schema=arrow)


def _base_rows(schema: TableSchema, mutation: Mutation) -> pa.Table:
    pk = serialize_partition_key(schema, mutation.partition.pk)
    return write_rows(schema, pk, mutation.partition, seq=1)


def _fixtures() -> dict[str, Any]:
    schema = _schema()
    rows = []
    for text, ts in ROW_WRITES:
        mutation = _row_write(schema, text, ts)
        rows.append(
            {
                "cql": text,
                "ts": ts,
                "fragment": encode_fragment(mutation.partition).hex(),
                "base_rows": _rows_json(_base_rows(schema, mutation)),
                "payload": encode_payload(_payload(mutation)).hex(),
            }
        )
    _, _, chunk, bulk_rows = _bulk(schema)
    return {
        "row_writes": rows,
        "conditional_writes": [
            {"cql": text, "payload": encode_payload(_conditional(schema, text)).hex()}
            for text in CONDITIONAL_WRITES
        ],
        "other_payloads": [encode_payload(p).hex() for p in OTHER_PAYLOADS],
        "bulk_chunk": chunk.hex(),
        # written by an earlier version (no bucket column): kept, never regenerated
        "bulk_chunk_before_buckets": json.loads(GOLDEN.read_text())["bulk_chunk_before_buckets"],
        "bulk_base_rows": _rows_json(bulk_rows),
    }


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())
    return data


def test_row_path_fragments_and_payloads_decode_and_encode_to_the_same_bytes(
    golden: dict[str, Any],
) -> None:
    schema = _schema()
    assert [(w["cql"], w["ts"]) for w in golden["row_writes"]] == ROW_WRITES
    for fixture in golden["row_writes"]:
        mutation = _row_write(schema, fixture["cql"], fixture["ts"])
        fragment = bytes.fromhex(fixture["fragment"])
        assert decode_fragment(fragment) == mutation.partition, fixture["cql"]
        assert encode_fragment(mutation.partition) == fragment, fixture["cql"]
        rows = _base_rows(schema, mutation)
        assert _rows_json(rows) == fixture["base_rows"], fixture["cql"]
        old = _rows_from_json(schema, fixture["base_rows"])
        assert list(partitions(schema, old).values()) == [mutation.partition], fixture["cql"]
        payload = bytes.fromhex(fixture["payload"])
        assert decode_payload(payload) == _payload(mutation), fixture["cql"]
        assert encode_payload(_payload(mutation)) == payload, fixture["cql"]


def test_conditional_writes_and_requests_decode_and_encode_to_the_same_bytes(
    golden: dict[str, Any],
) -> None:
    schema = _schema()
    assert [w["cql"] for w in golden["conditional_writes"]] == CONDITIONAL_WRITES
    for fixture in golden["conditional_writes"]:
        write = _conditional(schema, fixture["cql"])
        payload = bytes.fromhex(fixture["payload"])
        assert decode_payload(payload) == write, fixture["cql"]
        assert encode_payload(write) == payload, fixture["cql"]
    kept = [bytes.fromhex(h) for h in golden["other_payloads"]]
    assert [decode_payload(p) for p in kept] == OTHER_PAYLOADS
    assert [encode_payload(p) for p in OTHER_PAYLOADS] == kept


def test_bulk_base_rows_and_chunks_decode_and_encode_to_the_same_form(
    golden: dict[str, Any],
) -> None:
    schema = _schema()
    table, statements, _, made = _bulk(schema)
    assert _rows_json(made) == golden["bulk_base_rows"]  # the bulk layout did not drift
    mutations = chunk_mutations(schema, table, statements)
    old = _rows_from_json(schema, golden["bulk_base_rows"])
    order = np.argsort(table.column("_token").to_numpy(), kind="stable")
    assert [p for _, p in row_partitions(schema, old)] == [mutations[i] for i in order]
    # the chunk: an Arrow IPC stream (its bytes are pyarrow's), read back to the same writes
    old_table, old_statements = concat_chunks([decode_chunk(bytes.fromhex(golden["bulk_chunk"]))])
    assert old_statements == statements
    assert old_table.equals(table)


def test_chunks_made_before_the_bucket_column_read_as_their_records_bucket(
    golden: dict[str, Any],
) -> None:
    """An ingest log written by an earlier version holds chunks of one bucket each, with no
    bucket column: they decode to the same writes, and their bucket is their record's."""
    schema = _schema()
    table, statements, payload, _ = _bulk(schema)
    before = bytes.fromhex(golden["bulk_chunk_before_buckets"])
    old_table, old_statements = concat_chunks([decode_chunk(before)])
    assert old_statements == statements
    assert old_table.equals(table.drop_columns([BUCKET_OF]))
    records = records_to_arrow(
        [
            IngestRecord(14, "ks.t", 1, 0, 0, b"", payload),
            IngestRecord(20, "ks.t", 1, 5, 0, b"", before),  # the same writes, as of bucket 5
        ]
    )
    split = split_chunks(records)
    assert sorted(split) == [("ks.t", 0), ("ks.t", 5)]
    assert split[("ks.t", 5)].record_seqs == (20, 20)
    assert (
        split[("ks.t", 5)]
        .table.drop_columns([VERSION])
        .equals(split[("ks.t", 0)].table.drop_columns([VERSION]))
    )


def test_chunks_read_as_views_of_an_ingest_column_decode_like_their_bytes(
    golden: dict[str, Any],
) -> None:
    chunk = bytes.fromhex(golden["bulk_chunk"])
    row = bytes.fromhex(golden["row_writes"][0]["payload"])
    # a sliced, multi-chunk column, as a batch's records are after sorting and grouping
    column = pa.chunked_array(
        [pa.array([row, chunk, b""], pa.binary()).slice(1), pa.array([chunk, row], pa.binary())]
    )
    assert chunk_mask(column).tolist() == [True, False, True, False]
    views = payload_views(column)
    assert [v.to_pybytes() for v in views] == [chunk, b"", chunk, row]
    expected = decode_chunk(chunk)
    for view in (views[0], views[2]):
        found = decode_chunk(view)
        assert found.statements == expected.statements and found.table.equals(expected.table)
    with pytest.raises(CorruptIngestFile):
        decode_chunk(views[3])


if __name__ == "__main__":  # write the fixtures of this version (a deliberate format change)
    GOLDEN.write_text(json.dumps(_fixtures(), indent=1) + "\n")
    print(f"wrote {GOLDEN}")


CALLS: list[str] = []


def _called() -> str:
    CALLS.append("called")
    return "called"


class _Hostile:
    """Pickles as a call of a function (any function would do, ``os.system`` too): what a
    data file of format 1 could hold to run code when an unpickler decodes it."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_called, ())


@pytest.mark.parametrize(
    "data", [b"CQM1" + pickle.dumps(_Hostile(), protocol=5), b"CQM1\x80\x05\x95"]
)
def test_pickles_of_format_1_are_refused_unread(data: bytes) -> None:
    with pytest.raises(CorruptIngestFile, match=r"format 1 \(a pickle"):
        decode_payload(data)
    with pytest.raises(CorruptIngestFile, match=r"format 1 \(a pickle"):
        decode_fragment(data)
    assert CALLS == []


def _golden_records(golden: dict[str, Any]) -> list[tuple[bytes, Any]]:
    """Every row-path fixture with the decoder it is for."""
    records: list[tuple[bytes, Any]] = []
    for w in golden["row_writes"]:
        records += [(bytes.fromhex(w["fragment"]), decode_fragment)]
        records += [(bytes.fromhex(w["payload"]), decode_payload)]
    for w in golden["conditional_writes"]:
        records += [(bytes.fromhex(w["payload"]), decode_payload)]
    records += [(bytes.fromhex(h), decode_payload) for h in golden["other_payloads"]]
    return records


def test_a_truncated_or_damaged_record_is_reported_as_corrupt(golden: dict[str, Any]) -> None:
    """Whatever a damaged file holds, decoding ends in CorruptIngestFile or in some value of
    the layout, never in another exception (a crash of the engine) or a partial record."""
    for data, decode in _golden_records(golden):
        decode(data)
        for end in range(len(data)):
            with pytest.raises(CorruptIngestFile):
                decode(data[:end])
        with pytest.raises(CorruptIngestFile, match="left over"):
            decode(data + b"N")
        for at in range(4, len(data)):
            for byte in (0x00, 0x7F, 0xFF, data[at] ^ 0x01):
                damaged = data[:at] + bytes([byte]) + data[at + 1 :]
                with contextlib.suppress(CorruptIngestFile):
                    decode(damaged)


@pytest.mark.parametrize(
    "data",
    [
        b"CQW1W" + b"t\x00\x00\x00\x01" * 100_000,  # nested deeper than the stack
        b"CQW1W" + b"t\xff\xff\xff\xff" + b"N" * 16,  # a count past the record
        b"CQP1t\x00\x00\x00\x00N\x00N\xff\xff\xff\xff",  # a row count past the record
        b"CQW1K" + b"s\x00\x00\x00\x01x",  # a clock that is text
        b"CQW1Q",  # no such payload
        b"CQX1",  # no such format
    ],
)
def test_hostile_records_are_refused_cheaply(data: bytes) -> None:
    with pytest.raises(CorruptIngestFile):
        decode_payload(data)
    with pytest.raises(CorruptIngestFile):
        decode_fragment(data)


def test_a_set_encodes_to_the_same_bytes_in_every_process() -> None:
    """A frozenset's iteration order follows string hashes, which differ per process; its
    elements are written ordered by their bytes, so a replayed write stores the same bytes."""
    script = (
        "from cqlcdc.storage.codec import encode_fragment;"
        "from cqlcdc.storage.partition import Partition;"
        "from cqlcdc.storage.cells import Cell;"
        "p = Partition((frozenset(f'e{i}' for i in range(64)),));"
        "p.static.cells['s'] = Cell(1, frozenset({'x', 'y', 'zz', 'w'}));"
        "print(encode_fragment(p).hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


def test_a_value_of_every_cql_type_survives_the_encoding() -> None:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement("CREATE TYPE ks.u (a int, b text)"), "ks")
    columns = {
        "a": ("ascii", "'x'"),
        "b": ("bigint", "1"),
        "c": ("blob", "0x01"),
        "d": ("boolean", "true"),
        "f": ("date", "'2020-01-01'"),
        "g": ("decimal", "1.5"),
        "h": ("double", "1.5"),
        "i": ("duration", "1h"),
        "j": ("float", "1.5"),
        "k": ("inet", "'127.0.0.1'"),
        "m": ("smallint", "1"),
        "o": ("time", "'10:00:00'"),
        "p": ("timestamp", "'2020-01-01'"),
        "q": ("timeuuid", "now()"),
        "r": ("tinyint", "1"),
        "s": ("uuid", "uuid()"),
        "t": ("varint", "12345678901234567890"),
        "u": ("frozen<u>", "{a: 1, b: 'x'}"),
        "uu": ("u", "{a: 1, b: 'x'}"),
        "v": ("list<int>", "[1, 2]"),
        "w": ("set<text>", "{'a'}"),
        "x": ("map<int, text>", "{1: 'a'}"),
        "y": ("tuple<int, text>", "(1, 'a')"),
        "z": ("frozen<set<inet>>", "{'::1'}"),
        "vv": ("vector<float, 2>", "[1.0, 2.0]"),
        "fm": (
            "frozen<map<uuid, frozen<list<decimal>>>>",
            "{5b6962dd-3f90-4c93-8f61-eabfa4a803e2: [1.5]}",
        ),
    }
    cols = ", ".join(f"{name} {cql}" for name, (cql, _) in columns.items())
    catalog.execute(parse_statement(f"CREATE TABLE ks.all (pk int PRIMARY KEY, {cols})"), "ks")
    schema = catalog.table("ks", "all")
    assert schema is not None
    names = ", ".join(columns)
    values = ", ".join(literal for _, literal in columns.values())
    stmt = parse_statement(f"INSERT INTO ks.all (pk, {names}) VALUES (1, {values})")
    mutation = row_mutation(schema, stmt, WriteContext(1, NOW_US, SEED))
    assert decode_fragment(encode_fragment(mutation.partition)) == mutation.partition
    rows = _base_rows(schema, mutation)
    assert rows.column("fragment").null_count == rows.num_rows  # every value typed
    assert list(partitions(schema, rows).values()) == [mutation.partition]
    payload = WritePayload(mutation.partition, (), NOW_US, SEED)
    assert decode_payload(encode_payload(payload)) == payload
