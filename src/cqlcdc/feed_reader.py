"""Reading changefeed topics: a reader by offset, and consumers with committed offsets.

Readers never start Spark: they read the topic's Delta table at the version of the last
committed batch (the engine's manifest), so a record is visible only after the write that
caused it is committed, and each record is seen once per offset.

>>> reader = FeedReader("/tmp/data", "ks.t/updates")  # doctest: +SKIP
>>> for message in reader.read(partition=0, from_offset=0): ...  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pyarrow as pa

from cqlcdc.cdc.feeds import FEED_SCHEMA, feed_output, table_feeds
from cqlcdc.datadir.commit import Manifest, open_table, table_dir
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest
from cqlcdc.location import Location
from cqlcdc.observe import events

if TYPE_CHECKING:
    from cqlcdc.changefeed.options import FeedOptions
    from cqlcdc.schema.catalog import Catalog


class FeedMessage(NamedTuple):
    """One record of a topic: its place (partition, offset), message key and value.

    A gap notice (records removed by retention before they were read) has ``key`` None and
    ``value`` ``{"gap": {"from": first_missing, "to": first_available}}``.
    """

    partition: int
    offset: int
    key: Any
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "key": self.key,
            "value": self.value,
        }


def check_partition(partition: int, partitions: int) -> None:
    """Raises InvalidRequest unless ``partition`` is one of a topic's ``partitions``."""
    if not 0 <= partition < partitions:
        raise InvalidRequest(f"Partition {partition} does not exist (the topic has {partitions})")


class OffsetOutOfRange(InvalidRequest):
    """The requested offset is older than the earliest record the topic still retains."""


class FeedReader:
    """Reads one changefeed topic, ``"ks.table/feed"``, of a data directory."""

    def __init__(
        self, data_dir: Location | str | os.PathLike[str], feed: str, catalog: Catalog | None = None
    ) -> None:
        """Find the feed's topic.

        Args:
            data_dir: the data directory (a local path or an object-store URI).
            feed: ``"keyspace.table/feed"``.
            catalog: the schema to find the feed in (default: the data directory's, read
                from disk; the server passes its own).

        Raises:
            InvalidRequest: a malformed name, an unknown table or changefeed.
        """
        self.data_dir = Location.of(data_dir)
        self.name = feed
        self.options, self.output = self._find(catalog)
        # the topic's Delta table
        self.table = table_dir(self.data_dir / "tables", self.output)

    def _find(self, catalog: Catalog | None) -> tuple[FeedOptions, str]:
        """The feed's options and the topic table of its current incarnation."""
        table, _, name = self.name.partition("/")
        ks, _, tname = table.rpartition(".")
        if not name or not ks:
            raise InvalidRequest(f"A changefeed is named keyspace.table/feed, not {self.name!r}")
        if catalog is None:
            from cqlcdc.schema.catalog import Catalog

            catalog = Catalog(DocumentDirectory(self.data_dir))
        schema = catalog.table(ks, tname)
        if schema is None:
            raise InvalidRequest(f"unconfigured table {tname}")
        found = [f for f in table_feeds(schema) if f.name == name]
        if not found:
            raise InvalidRequest(f"Changefeed {name} does not exist in table {ks}.{tname}")
        return found[0].options, feed_output(schema.table_id, found[0].topic)

    def is_current(self) -> bool:
        """Whether the incarnation this reader reads is still the feed's (read from disk):
        false once the feed, its table or its keyspace was dropped (and maybe made again),
        after which its topic never gets another record."""
        try:
            return self._find(None)[1] == self.output
        except InvalidRequest:
            return False

    @property
    def partitions(self) -> int:
        return self.options.partitions

    def _table(self, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
        version = Manifest.load(self.data_dir).versions.get(self.output)
        if version is None:  # nothing committed to the topic yet
            names = columns if columns is not None else FEED_SCHEMA.names
            return FEED_SCHEMA.empty_table().select(names)
        return open_table(self.table, version).to_pyarrow_table(columns=columns, filters=filters)

    def next_offsets(self) -> dict[int, int]:
        """The offset the next record of each partition will get (committed state)."""
        state = Manifest.load(self.data_dir).extra.get("feeds", {}).get(self.output, {})
        nxt = state.get("next", {})
        return {p: int(nxt.get(str(p), 0)) for p in range(self.partitions)}

    def earliest_offsets(self) -> dict[int, int]:
        """The oldest retained offset per partition (the next offset if none is retained)."""
        out = self.next_offsets()
        table = self._table(["partition", "offset"])
        for row in table.group_by("partition").aggregate([("offset", "min")]).to_pylist():
            out[int(row["partition"])] = int(row["offset_min"])
        return out

    def read(
        self,
        partition: int | None = None,
        from_offset: int = 0,
        *,
        on_gap: Literal["error", "notice"] = "error",
    ) -> Iterator[FeedMessage]:
        """The committed records of one partition (or all, partition by partition) from
        ``from_offset`` on.

        Raises:
            OffsetOutOfRange: ``from_offset`` was removed by retention and ``on_gap`` is
                ``"error"``; with ``"notice"`` a gap notice message is yielded instead and
                reading resumes at the earliest retained offset (never a silent skip).
        """
        parts = range(self.partitions) if partition is None else [partition]
        if partition is not None:
            check_partition(partition, self.partitions)
        earliest = self.earliest_offsets()
        for p in parts:
            start = from_offset
            if start < earliest[p]:
                events.retention_gap(self.name, p, start, earliest[p])
                if on_gap == "error":
                    raise OffsetOutOfRange(
                        f"Offset {start} of partition {p} of {self.name} is no longer retained; "
                        f"the earliest retained offset is {earliest[p]}"
                    )
                yield FeedMessage(p, start, None, {"gap": {"from": start, "to": earliest[p]}})
                start = earliest[p]
            for offset, key, value in self.raw_records(p, start):
                yield FeedMessage(
                    p, offset, None if key is None else json.loads(key), json.loads(value)
                )

    def raw_records(
        self, partition: int, first: int = 0, last: int | None = None, limit: int | None = None
    ) -> list[tuple[int, str | None, str]]:
        """The committed records of ``partition`` with offsets ``first``..``last``
        (inclusive), at most ``limit`` of them, in offset order, as (offset, key JSON text
        or None, value JSON text); no gap handling (``read`` adds it)."""
        filters: list[tuple[str, str, Any]] = [("partition", "=", partition)]
        filters.append(("offset", ">=", first))
        if last is not None:
            filters.append(("offset", "<=", last))
        table = self._table(["partition", "offset", "key", "value"], filters).sort_by("offset")
        if limit is not None:
            table = table.slice(0, limit)
        offsets, keys, values = (table[c].to_pylist() for c in ("offset", "key", "value"))
        return list(zip((int(o) for o in offsets), keys, values, strict=True))

    def raw_ranges(
        self, ranges: dict[int, tuple[int, int]]
    ) -> dict[int, list[tuple[int, str | None, str]]]:
        """``raw_records`` of several partitions in one scan: for each partition ``p`` the
        committed records with offsets ``ranges[p][0]``..``ranges[p][1]`` (inclusive)."""
        if not ranges:
            return {}
        filters = [
            [("partition", "=", p), ("offset", ">=", first), ("offset", "<=", last)]
            for p, (first, last) in ranges.items()
        ]
        table = self._table(["partition", "offset", "key", "value"], filters).sort_by(
            [("partition", "ascending"), ("offset", "ascending")]
        )
        out: dict[int, list[tuple[int, str | None, str]]] = {p: [] for p in ranges}
        columns = (table[c].to_pylist() for c in ("partition", "offset", "key", "value"))
        for partition, offset, key, value in zip(*columns, strict=True):
            out[int(partition)].append((int(offset), key, value))
        return out

    def follow(
        self,
        partition: int | None = None,
        from_offset: int = 0,
        *,
        poll_s: float = 0.2,
        on_gap: Literal["error", "notice"] = "notice",
        stop_after_s: float | None = None,
    ) -> Iterator[FeedMessage]:
        """Like ``read`` but keeps waiting for new records (until ``stop_after_s``, if set)."""
        positions = {
            p: from_offset for p in (range(self.partitions) if partition is None else [partition])
        }
        deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
        while deadline is None or time.monotonic() < deadline:
            got = False
            for p in list(positions):
                for msg in self.read(p, positions[p], on_gap=on_gap):
                    positions[p] = (
                        msg.offset + 1 if "gap" not in (msg.value or {}) else msg.value["gap"]["to"]
                    )
                    got = True
                    yield msg
            if not got:
                time.sleep(poll_s)


class FeedConsumer:
    """A consumer group: reads from its committed offsets, commits what it processed.

    Offsets live in ``<data_dir>/consumers/<feed output>/<group>.json`` (atomic writes), so
    a consumer that restarts resumes exactly after its last commit: no loss, no duplicates
    beyond what it read and did not commit.
    """

    def __init__(self, data_dir: Location | str | os.PathLike[str], feed: str, group: str) -> None:
        self.reader = FeedReader(data_dir, feed)
        self.offsets = self.reader.data_dir.child("consumers", self.reader.output, f"{group}.json")
        self.committed: dict[int, int] = {p: 0 for p in range(self.reader.partitions)}
        text = self.offsets.read_text()
        if text is not None:
            stored = json.loads(text)
            self.committed.update({int(k): int(v) for k, v in stored.items()})
        self.position = dict(self.committed)

    def poll(self, max_records: int = 1000) -> list[FeedMessage]:
        """The next records after the current position (gap notices included)."""
        out: list[FeedMessage] = []
        for p in range(self.reader.partitions):
            for msg in self.reader.read(p, self.position[p], on_gap="notice"):
                if len(out) >= max_records:
                    return out
                out.append(msg)
                gap = msg.value.get("gap") if isinstance(msg.value, dict) else None
                self.position[p] = gap["to"] if gap and msg.key is None else msg.offset + 1
        return out

    def commit(self) -> None:
        """Make the current position durable."""
        self.offsets.parent.makedirs()
        self.offsets.write_atomically(json.dumps({str(p): o for p, o in self.position.items()}))
        self.committed = dict(self.position)
