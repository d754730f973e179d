"""The core alone, in memory: statements -> mutations -> log rows and state, without Spark.

A fast way to pin core behaviour, and the reference the end-to-end tests compare the engine
with: it runs the session's write planner and the pipeline's own row path
(``cqlcdc.cdc.row_path.apply_record``), one write at a time, with no encoding, buckets,
Spark, Delta commits, compaction or recovery in between. It does not re-implement the row
path, so it cannot disagree with it: what a comparison with it checks is everything the
engine adds around the row path; what the row path itself does is pinned by the tests'
expected values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.cdc.feeds import FeedStager, active_feeds
from cqlcdc.cdc.log_writer import LogWriter
from cqlcdc.cdc.row_path import BucketContext, apply_record
from cqlcdc.cdc.streams import Generation
from cqlcdc.cql import ast, parse_statement
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.describe import describe_statement
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.codec import WritePayload
from cqlcdc.storage.conditions import evaluate as evaluate_conditions
from cqlcdc.storage.mutations import Mutation, WriteContext
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.select import base_partition_rows, evaluate, prepare
from cqlcdc.storage.token import murmur3_token, serialize_partition_key
from cqlcdc.storage.uuids import splitmix64
from cqlcdc.storage.view import PartitionView
from cqlcdc.writes import plan_write

NOW_US = 1_700_000_000_000_000


@dataclass
class CoreModel:
    """An in-memory cqlcdc: catalog, partition states and log rows per table."""

    catalog: Catalog = field(default_factory=Catalog)
    keyspace: str | None = None
    states: dict[str, dict[tuple[Any, ...], Partition]] = field(default_factory=dict)
    logs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    clock_us: int = NOW_US
    generation: Generation = field(default_factory=lambda: Generation.create(0, 4, 1))
    _seeds: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def run(self, cql: str) -> Any:
        stmt = parse_statement(cql)
        if isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
            return self.write(stmt)
        if isinstance(stmt, ast.Select):
            return self.select(stmt)
        if isinstance(stmt, ast.UseKeyspace):
            self.keyspace = stmt.name
            return None
        if isinstance(stmt, ast.Describe):
            return describe_statement(self.catalog, stmt, self.keyspace)
        self.catalog.execute(stmt, self.keyspace)
        return None

    def table(self, name: ast.QualifiedName) -> TableSchema:
        schema = self.catalog.table(name.keyspace or self.keyspace or "", name.name)
        assert schema is not None, name
        return schema

    def write(self, stmt: ast.Insert | ast.Update | ast.Delete | ast.Batch) -> list[dict[str, Any]]:
        """Apply a write as the pipeline would (the session's own planner, ``plan_write``);
        a lightweight transaction whose condition fails writes and logs nothing."""
        self.clock_us += 10
        # 64 random-looking bits, as the coordinator's seeds are: small consecutive seeds
        # collide under the log writer's seed ^ record (a batch's second partition and the
        # next write would share their cdc$time bits)
        seed = splitmix64(next(self._seeds))
        ctx = WriteContext(self.clock_us, self.clock_us, seed)
        plan = plan_write(self.table, stmt, ctx)
        written: list[dict[str, Any]] = []
        for record, m in enumerate(plan.mutations):
            schema = plan.schemas[m.table_id]
            if plan.condition is not None:
                current = self.states.get(schema.table_id, {}).get(m.partition.pk)
                if not evaluate_conditions(schema, plan.condition, current, ctx.now_s)[0]:
                    continue
            written += self.apply(schema, m, ctx.now_s, seed, record)
        return written

    def apply(
        self, schema: TableSchema, m: Mutation, now_s: int, seed: int, record: int = 0
    ) -> list[dict[str, Any]]:
        """Apply one partition's mutation; ``record`` numbers the partitions of one write
        (their log rows share the seed, as the pipeline's records do, yet differ)."""
        states = self.states.setdefault(schema.table_id, {})
        pk = m.partition.pk
        key = serialize_partition_key(schema, pk)
        token = murmur3_token(key)
        ctx = BucketContext(
            schema,
            0,
            FeedStager(schema, active_feeds(schema)),
            lambda version: self.catalog.table_by_id(schema.table_id, version),
            _NoScans(),
        )
        writer = LogWriter(schema, pk, lambda ts: self.generation.stream_for_token(token))
        payload = WritePayload(m.partition, tuple(m.list_ops), now_s * 1_000_000, seed)
        # ``seq`` numbers the records of a write as the pipeline's seqs do (the log writer
        # makes a batch's partitions' cdc$time differ by it)
        rec = {
            "seq": record,
            "pk": key,
            "token": token,
            "schema_version": schema.schema_version,
            "decoded": payload,
        }
        current = apply_record(ctx, writer, rec, pk, states.get(pk))
        if ctx.out.errors:  # refused (a list index out of bounds): the writer's error
            raise ctx.out.errors[0][3]
        if current is not None:
            states[pk] = current
        self.logs.setdefault(schema.table_id, []).extend(ctx.out.log)
        return ctx.out.log

    def select(self, stmt: ast.Select) -> list[tuple[Any, ...]]:
        schema = self.table(stmt.table)
        res = prepare(schema, stmt)
        view = PartitionView(schema)
        now_s = self.clock_us // 1_000_000
        parts = [
            base_partition_rows(
                schema, p, murmur3_token(serialize_partition_key(schema, pk)), now_s, view
            )
            for pk, p in self.states.get(schema.table_id, {}).items()
        ]
        return evaluate(schema, stmt, res, parts, now_s).rows

    def log(self, table: str, *columns: str) -> list[tuple[Any, ...]]:
        schema = self.table(parse_qualified(table))
        return [tuple(r.get(c) for c in columns) for r in self.logs.get(schema.table_id, [])]


def parse_qualified(name: str) -> ast.QualifiedName:
    ks, _, t = name.rpartition(".")
    return ast.QualifiedName(ks or None, t)


class _NoScans:
    """No initial scan is ever in progress in the model."""

    def get(self, table_id: str, feed: str) -> dict[str, int | None] | None:
        return None

    def scanning(self, table_id: str, feed: str, seq: int) -> bool:
        return False
