"""The core alone, in memory: statements -> mutations -> log rows and state, without Spark.

A test oracle (and a fast way to pin core behaviour): it runs the same functions the pipeline
runs (the session's write planner, list resolution, conditions, the log writer), one write at
a time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.cdc.streams import Generation
from cqlcdc.cql import ast, parse_statement
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.describe import describe_statement
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.conditions import evaluate as evaluate_conditions
from cqlcdc.storage.list_ops import resolve_list_ops
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
        current = states.get(m.partition.pk)
        if m.list_ops:
            resolve_list_ops(schema, m.partition, tuple(m.list_ops), current, now_s)
        m.partition.prune_empty()
        rows: list[dict[str, Any]] = []
        if schema.cdc.enabled and not m.partition.is_empty():
            token = murmur3_token(serialize_partition_key(schema, m.partition.pk))
            writer = LogWriter(
                schema, m.partition.pk, lambda ts: self.generation.stream_for_token(token)
            )
            rows = writer.write(m.partition, current, WriteInfo(now_s, seed, record))
            self.logs.setdefault(schema.table_id, []).extend(rows)
        if current is None:
            current = states[m.partition.pk] = Partition(m.partition.pk)
        current.apply(m.partition)
        return rows

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
