"""The core as the pipeline runs it: one table's records of one bucket -> output rows.

For each partition, in record order: decode the mutation, resolve positional list operations
against the current state, write the CDC log rows from the mutation and the state, then apply
the mutation to the state. Outputs are Arrow tables: ``base/<table_id>`` (one fragment per
write), ``log/<table_id>`` (typed log rows) and ``errors`` (writes that failed in the
pipeline, e.g. a list index out of bounds).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from cqlcdc.cdc.log_writer import LogRow, LogWriter, WriteInfo
from cqlcdc.cdc.streams import Generations
from cqlcdc.errors import CqlError
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.codec import decode_fragment, decode_payload, encode_fragment
from cqlcdc.storage.list_ops import resolve_list_ops
from cqlcdc.storage.partition import Partition

BASE_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("fragment", pa.binary(), nullable=False),
    ]
)
ERRORS_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("code", pa.int32(), nullable=False),
        pa.field("class", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ]
)
# internal columns of a log output besides the log table's own columns (the leading
# underscore keeps them apart from user columns, whose names never start with one unquoted)
LOG_INTERNAL = (
    pa.field("_bucket", pa.int32(), nullable=False),
    pa.field("_pk", pa.binary(), nullable=False),
    pa.field("_seq", pa.int64(), nullable=False),
    pa.field("_expiry_s", pa.int64(), nullable=False),
)


GENERATIONS_FILE = "cdc_generations.json"


def base_output(schema: TableSchema) -> str:
    return f"base/{schema.table_id}"


def log_output(schema: TableSchema) -> str:
    return f"log/{schema.table_id}"


class SchemaSource(Protocol):
    """Where the processor finds table schemas (the catalog)."""

    def table_by_id(self, table_id: str, version: int | None = None) -> TableSchema | None: ...


def log_arrow_schema(log: TableSchema) -> pa.Schema:
    fields = [pa.field(c.name, c.type.arrow_type()) for c in log.columns]
    return pa.schema([*LOG_INTERNAL, *fields])


def log_rows_to_arrow(log: TableSchema, rows: list[dict[str, Any]]) -> pa.Table:
    schema = log_arrow_schema(log)
    data: dict[str, list[Any]] = {f.name: [] for f in schema}
    for row in rows:
        for col in log.columns:
            v = row.get(col.name)
            data[col.name].append(None if v is None else col.type.to_arrow(v))
        for f in LOG_INTERNAL:
            data[f.name].append(row[f.name])
    return pa.Table.from_pydict(data, schema=schema)


def merge_fragments(pk: tuple[Any, ...], fragments: list[bytes]) -> Partition:
    """A partition's state: the merge of every fragment written to it."""
    state = Partition(pk)
    for frag in fragments:
        state.apply(decode_fragment(frag))
    return state


@dataclass(slots=True)
class _Outputs:
    base: list[dict[str, Any]]
    log: list[dict[str, Any]]
    errors: list[dict[str, Any]]


class CoreProcessor:
    """The ``BucketProcessor`` of cqlcdc (picklable: executors rebuild the catalog from disk).

    Args:
        data_dir: the data directory (catalog and CDC generations live there).
        catalog: the live catalog when running in the session's process.
    """

    def __init__(self, data_dir: str | Path, catalog: SchemaSource | None = None) -> None:
        self.data_dir = str(data_dir)
        self._catalog = catalog
        self._generations: Generations | None = None
        self._generations_mtime = -1
        self.truncations = Truncations(self.data_dir)

    def __getstate__(self) -> dict[str, Any]:
        return {"data_dir": self.data_dir}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.data_dir = state["data_dir"]
        self._catalog = None
        self._generations = None
        self._generations_mtime = -1
        self.truncations = Truncations(self.data_dir)

    @property
    def catalog(self) -> SchemaSource:
        if self._catalog is None:
            from cqlcdc.schema.catalog import Catalog

            self._catalog = Catalog(Path(self.data_dir))
        return self._catalog

    @property
    def generations(self) -> Generations:
        """The CDC generations, re-read when a new generation was added to the file."""
        path = Path(self.data_dir) / GENERATIONS_FILE
        mtime = path.stat().st_mtime_ns if path.exists() else -1
        if self._generations is None or mtime != self._generations_mtime:
            self._generations = load_generations(Path(self.data_dir))
            self._generations_mtime = mtime
        return self._generations

    def expiry_column(self, output: str) -> str | None:
        """Outputs whose rows expire: CDC logs, by their ``_expiry_s`` (the log ``ttl``)."""
        return "_expiry_s" if output.startswith("log/") else None

    def _schema(self, table_id: str, version: int) -> TableSchema | None:
        schema = self.catalog.table_by_id(table_id, version)
        if schema is None and self._catalog is not None and hasattr(self._catalog, "reload"):
            self._catalog.reload()
            schema = self.catalog.table_by_id(table_id, version)
        return schema

    def process_bucket(
        self, table_id: str, bucket: int, records: pa.Table, state: Any
    ) -> dict[str, pa.Table]:
        from cqlcdc.schema.log_table import log_table_schema
        from cqlcdc.storage.token import deserialize_partition_key

        recs = records.to_pylist()
        if not recs:
            return {}
        latest = self._schema(table_id, max(r["schema_version"] for r in recs))
        if latest is None:  # the table was dropped before its writes were applied
            return {}
        pks = sorted({r["pk"] for r in recs})
        prior = state.read(base_output(latest), bucket, pks)
        fragments: dict[bytes, list[tuple[int, bytes]]] = {}
        truncated = self.truncations.upto(table_id)
        if prior.num_rows:
            for row in prior.select(["pk", "seq", "fragment"]).to_pylist():
                if row["seq"] <= truncated:
                    continue
                fragments.setdefault(row["pk"], []).append((row["seq"], row["fragment"]))
        out = _Outputs([], [], [])
        by_pk: dict[bytes, list[dict[str, Any]]] = {}
        for r in recs:
            by_pk.setdefault(r["pk"], []).append(r)
        for pk_bytes, group in by_pk.items():
            pk = deserialize_partition_key(latest, pk_bytes)
            frags = [f for _, f in sorted(fragments.get(pk_bytes, []))]
            current = merge_fragments(pk, frags) if frags else None
            token: int = group[0]["token"]
            writer = LogWriter(latest, pk, self._stream_function(token))
            for rec in sorted(group, key=lambda r: r["seq"]):
                current = self._apply(latest, writer, rec, bucket, current, out)
        result: dict[str, pa.Table] = {}
        if out.base:
            result[base_output(latest)] = pa.Table.from_pylist(out.base, schema=BASE_SCHEMA)
        if out.log:
            result[log_output(latest)] = log_rows_to_arrow(log_table_schema(latest), out.log)
        if out.errors:
            result["errors"] = pa.Table.from_pylist(out.errors, schema=ERRORS_SCHEMA)
        return result

    def _stream_function(self, token: int) -> Callable[[int], bytes]:
        gens = self.generations

        def stream_of(timestamp_us: int) -> bytes:
            return gens.stream_id(token, timestamp_us)

        return stream_of

    def _apply(
        self,
        schema: TableSchema,
        writer: LogWriter,
        rec: dict[str, Any],
        bucket: int,
        current: Partition | None,
        out: _Outputs,
    ) -> Partition | None:
        payload = decode_payload(rec["payload"])
        mutation = payload.partition
        now_s = payload.now_us // 1_000_000
        try:
            if payload.list_ops:
                resolve_list_ops(schema, mutation, payload.list_ops, current, now_s)
        except CqlError as e:
            out.errors.append(
                {
                    "bucket": bucket,
                    "pk": rec["pk"],
                    "seq": rec["seq"],
                    "code": e.code,
                    "class": e.class_name,
                    "message": e.message,
                }
            )
            return current
        if mutation.is_empty():
            return current
        if schema.cdc.enabled:
            rows: list[LogRow] = writer.write(mutation, current, WriteInfo(now_s, payload.seed))
            expiry = now_s + schema.cdc.ttl_s if schema.cdc.ttl_s else 0
            for row in rows:
                row["_bucket"] = bucket
                row["_pk"] = rec["pk"]
                row["_seq"] = rec["seq"]
                row["_expiry_s"] = expiry
            out.log.extend(rows)
        out.base.append(
            {
                "bucket": bucket,
                "pk": rec["pk"],
                "token": rec["token"],
                "seq": rec["seq"],
                "fragment": encode_fragment(mutation),
            }
        )
        if current is None:
            current = Partition(mutation.pk)
        current.apply(mutation)
        return current


class Truncations:
    """TRUNCATE points: base fragments with ``seq <= truncations[table_id]`` are gone.

    TRUNCATE empties the base table but not its CDC log (reference section 6); rather than
    rewriting files, the engine records the last seq the truncation covers and every reader
    of base state skips older fragments. Kept in ``<data_dir>/truncations.json``.
    """

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / "truncations.json"
        self._mtime = -1.0
        self._seqs: dict[str, int] = {}

    def seqs(self) -> dict[str, int]:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return {}
        if mtime != self._mtime:
            self._seqs = {str(k): int(v) for k, v in json.loads(self.path.read_text()).items()}
            self._mtime = mtime
        return self._seqs

    def upto(self, table_id: str) -> int:
        return self.seqs().get(table_id, 0)

    def truncate(self, table_id: str, seq: int) -> None:
        seqs = dict(self.seqs())
        seqs[table_id] = seq
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as sink:
            json.dump(seqs, sink)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(tmp, self.path)
        self._mtime = -1.0


def load_generations(data_dir: Path, num_ranges: int = 16, seed: int = 0) -> Generations:
    """The CDC generations of a data directory (created with the first one if missing)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return Generations.load_or_create(data_dir / GENERATIONS_FILE, num_ranges, seed)
