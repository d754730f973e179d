"""``system_cqlcdc``: the data directory's changefeed topics over CQL, for clients that
cannot read its files (``cqlcdc changefeed read --connect``). Two read-only virtual tables,
computed by ``FeedReader`` in the serving process at the last committed batch:
``changefeed_partitions`` (``feed`` key, ``partition`` clustering: ``earliest_offset``,
``next_offset``) and ``changefeed_records`` (``(feed, partition)`` key, ``offset``
clustering: ``key`` and ``value`` as JSON texts). A remote reader asks for the partitions,
then each partition's records from an offset, a page at a time::

    SELECT partition, earliest_offset, next_offset FROM system_cqlcdc.changefeed_partitions
        WHERE feed = 'ks.t/updates'
    SELECT partition, offset, key, value FROM system_cqlcdc.changefeed_records
        WHERE feed = 'ks.t/updates' AND partition = 0 AND offset >= 100 LIMIT 1000

A ``feed`` restriction names one ``keyspace.table/feed``; an unknown one is an error with
``FeedReader``'s message (so a remote reader prints what a local one does). A constant LIMIT
of a plain SELECT bounds the records read per partition.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cqlcdc.cdc.feeds import table_feeds
from cqlcdc.cql import ast
from cqlcdc.feed_reader import FeedReader
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.select import PartitionRows
from cqlcdc.storage.token import murmur3_token, serialize_partition_key
from cqlcdc.storage.where import KeyRestrictions
from cqlcdc.system.tables import FEEDS_KEYSPACE

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator

__all__ = ["FEEDS_KEYSPACE", "feed_partitions"]


def feed_partitions(
    coordinator: Coordinator, schema: TableSchema, stmt: ast.Select, res: KeyRestrictions
) -> list[PartitionRows]:
    """The partitions of a ``system_cqlcdc`` table that ``stmt`` can return (a superset:
    the evaluator applies the statement to them).

    Raises:
        InvalidRequest: a restricted feed name that is malformed or names no changefeed.
    """
    readers = _Readers(coordinator)
    if schema.name == "changefeed_partitions":
        names = _feeds(res, readers, 0)
        return [_partition_offsets(schema, readers.get(name)) for name in names]
    keys: Iterable[tuple[Any, ...]]
    if res.partition_keys is not None:
        keys = res.partition_keys
    else:
        keys = [(n, p) for n in readers.all_names() for p in range(readers.get(n).partitions)]
    cap = _records_cap(stmt, res)
    out = []
    for feed, partition in keys:
        reader = readers.get(feed)
        if not 0 <= partition < reader.partitions:
            continue  # no such partition: no rows
        seen: dict[int, dict[str, Any]] = {}
        for first, last in _offset_ranges(res):
            for offset, key, value in reader.raw_records(partition, first, last, cap):
                seen[offset] = {
                    "feed": feed,
                    "partition": partition,
                    "offset": offset,
                    "key": key,
                    "value": value,
                }
        rows = [seen[o] for o in sorted(seen)]
        out.append(PartitionRows(_token(schema, (feed, partition)), (feed, partition), rows))
    return out


class _Readers:
    """A FeedReader per feed name, over the coordinator's catalog (one statement's worth)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.data_dir = coordinator.data_dir
        self.catalog = coordinator.catalog
        self._readers: dict[str, FeedReader] = {}

    def get(self, name: str) -> FeedReader:
        reader = self._readers.get(name)
        if reader is None:
            reader = self._readers[name] = FeedReader(self.data_dir, name, self.catalog)
        return reader

    def all_names(self) -> list[str]:
        return sorted(
            f"{t.keyspace}.{t.name}/{f.name}" for t in self.catalog.tables() for f in table_feeds(t)
        )


def _feeds(res: KeyRestrictions, readers: _Readers, index: int) -> list[str]:
    if res.partition_keys is None:
        return readers.all_names()
    return sorted({str(pk[index]) for pk in res.partition_keys})


def _partition_offsets(schema: TableSchema, reader: FeedReader) -> PartitionRows:
    earliest, following = reader.earliest_offsets(), reader.next_offsets()
    rows = [
        {
            "feed": reader.name,
            "partition": p,
            "earliest_offset": earliest[p],
            "next_offset": following[p],
        }
        for p in range(reader.partitions)
    ]
    return PartitionRows(_token(schema, (reader.name,)), (reader.name,), rows)


def _offset_ranges(res: KeyRestrictions) -> list[tuple[int, int | None]]:
    """The offset ranges the clustering restrictions select, as inclusive (first, last)."""
    out: list[tuple[int, int | None]] = []
    for lower, upper in res.clustering_ranges():
        first = 0
        if lower.prefix:
            first = int(lower.prefix[0]) + (0 if lower.inclusive else 1)
        last: int | None = None
        if upper.prefix:
            last = int(upper.prefix[0]) - (0 if upper.inclusive else 1)
        out.append((max(first, 0), last))
    return out


def _records_cap(stmt: ast.Select, res: KeyRestrictions) -> int | None:
    """The records a partition needs at most: a constant LIMIT when the statement returns
    the first rows of each partition in offset order as they are (plain columns, no
    filters, ORDER BY, GROUP BY or DISTINCT); else None (all of them)."""
    if res.filters or stmt.order_by or stmt.group_by or stmt.distinct:
        return None
    if not all(isinstance(s.expr, ast.ColumnRef) for s in stmt.selectors):
        return None
    limit = stmt.limit
    if isinstance(limit, ast.Constant) and limit.kind == "integer" and limit.text.isdigit():
        return int(limit.text) or None
    return None


def _token(schema: TableSchema, pk: tuple[Any, ...]) -> int:
    return murmur3_token(serialize_partition_key(schema, pk))
