"""Changefeeds in the pipeline: records staged per bucket, then offsets and barriers per batch.

A write's feed records are made in its bucket task, from the same mutation and state that
make its CDC log rows (``row_events``), and staged with their ordering key (ingest seq,
index). Once per micro-batch the driver sorts the staged records of each topic partition,
gives them dense offsets following the last committed ones (kept in the manifest, so a
replayed batch gets the same offsets) and appends barrier records. Initial scans travel
through the ingest log as scan records, one per base partition, so they interleave with
writes exactly as YDB's three rules require.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.changefeed import FeedOptions, barrier_record, feed_options_from_texts
from cqlcdc.changefeed.events import RowEvent
from cqlcdc.changefeed.options import with_aws_region
from cqlcdc.changefeed.partitioner import MURMUR3
from cqlcdc.changefeed.records import encode, feed_records
from cqlcdc.directory import Directory
from cqlcdc.schema.model import TableSchema

STAGE_PREFIX = "feedstage/"
FEED_PREFIX = "feed/"
SCAN_PREFIX = "feedscan/"

TICK_PARTITION = -1  # staged marker rows that only carry a clock tick

STAGE_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("value", pa.string(), nullable=False),
        pa.field("created_ms", pa.int64(), nullable=False),
        pa.field("_seq", pa.int64(), nullable=False),
        pa.field("_idx", pa.int32(), nullable=False),
        pa.field("_step", pa.int64(), nullable=False),
        pa.field("_expiry_s", pa.int64(), nullable=False),
    ]
)
FEED_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("value", pa.string(), nullable=False),
        pa.field("created_ms", pa.int64(), nullable=False),
        pa.field("_seq", pa.int64(), nullable=False),
        pa.field("_expiry_s", pa.int64(), nullable=False),
    ]
)
SCAN_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("feed", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
    ]
)


def feed_output(table_id: str, topic: str) -> str:
    """The topic table of a feed incarnation: ``feed/<table_id>/<topic>``."""
    return f"{FEED_PREFIX}{table_id}/{topic}"


def stage_output(table_id: str, topic: str) -> str:
    return f"{STAGE_PREFIX}{table_id}/{topic}"


def scan_output(table_id: str) -> str:
    return f"{SCAN_PREFIX}{table_id}"


@dataclass(frozen=True, slots=True)
class Feed:
    """A changefeed: its name, options, and the topic of this incarnation of it (the key of
    its topic table, staged rows, scan state and consumer offsets).

    ``disabled``: ``ALTER CHANGEFEED ... DISABLE`` ran; the feed takes no more records but
    its topic stays readable. ``partitioner``: how its records are spread over partitions
    (``MD5``, YDB's, for feeds made now; ``MURMUR3`` for feeds made before, kept so that a
    key never moves to another partition of an existing topic)."""

    name: str
    options: FeedOptions
    topic: str
    disabled: bool = False
    partitioner: str = MURMUR3


def table_feeds(schema: TableSchema) -> list[Feed]:
    """The table's feeds with their options, disabled ones included (their topics are still
    read); parsed once per distinct option set: this runs for every bucket of every batch and
    every second in the session's sweeper."""
    return list(
        _parsed_feeds(
            schema.changefeeds,
            schema.feed_topics,
            schema.disabled_feeds,
            schema.feed_partitioners,
        )
    )


def active_feeds(schema: TableSchema) -> list[Feed]:
    """The feeds that take records: every write path asks this, never ``table_feeds``."""
    return [f for f in table_feeds(schema) if not f.disabled]


@functools.lru_cache(maxsize=256)
def _parsed_feeds(
    changefeeds: tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
    feed_topics: tuple[tuple[str, str], ...],
    disabled_feeds: tuple[str, ...],
    feed_partitioners: tuple[tuple[str, str], ...],
) -> tuple[Feed, ...]:
    topics = dict(feed_topics)
    partitioners = dict(feed_partitioners)
    return tuple(
        Feed(
            name,
            feed_options_from_texts(texts),
            topics.get(name, name),
            disabled=name in disabled_feeds,
            partitioner=partitioners.get(name, MURMUR3),
        )
        for name, texts in changefeeds
    )


class FeedScans:
    """Initial scans in progress, per ``<table_id>/<topic>``: the seq range of their scan
    records (``last_seq`` None while the scanner is still appending). Kept in
    ``<data_dir>/feedscans.json``; written by the session, read by the pipeline."""

    def __init__(self, data_dir: Directory) -> None:
        self.document = data_dir.document("feedscans.json")

    def all(self) -> dict[str, dict[str, int | None]]:
        data: dict[str, dict[str, int | None]] | None = self.document.load()
        return data or {}

    def get(self, table_id: str, feed: str) -> dict[str, int | None] | None:
        return self.all().get(f"{table_id}/{feed}")

    def put(
        self,
        table_id: str,
        feed: str,
        *,
        first_seq: int,
        last_seq: int | None,
        step: int,
        tx_id: int,
    ) -> None:
        """Record a scan: its records' seq range and its snapshot's virtual timestamp."""
        data = dict(self.all())
        data[f"{table_id}/{feed}"] = {
            "first_seq": first_seq,
            "last_seq": last_seq,
            "step": step,
            "tx_id": tx_id,
        }
        self.document.save(data)

    def scanning(self, table_id: str, feed: str, seq: int) -> bool:
        """Whether a write at ``seq`` may meet partitions the feed's scan has not exported."""
        scan = self.get(table_id, feed)
        if scan is None:
            return False
        last = scan["last_seq"]
        return last is None or seq <= last


class FeedStager:
    """Collects the staged feed rows of one bucket task, column by column (one list per
    ``STAGE_SCHEMA`` column and topic: building the table from them costs a fraction of
    building it from a dict per row)."""

    def __init__(self, schema: TableSchema, feeds: list[Feed], aws_region: str = "") -> None:
        self.schema = schema
        self.feeds = feeds
        self.aws_region = aws_region  # the server's default for feeds that set none
        self.columns: dict[str, dict[str, list[Any]]] = {}

    def _out(self, topic: str) -> dict[str, list[Any]]:
        name = stage_output(self.schema.table_id, topic)
        out = self.columns.get(name)
        if out is None:
            out = self.columns[name] = {f.name: [] for f in STAGE_SCHEMA}
        return out

    def add(
        self,
        feed: Feed,
        pk: tuple[Any, ...],
        events: list[RowEvent],
        *,
        seq: int,
        step: int,
        tx_id: int,
        created_ms: int,
        snapshot: bool = False,
        first_index: int = 0,
    ) -> int:
        """Stage the records of ``events``; returns the next free record index of ``seq``."""
        if not events:
            return first_index
        records = feed_records(
            with_aws_region(feed.options, self.aws_region),
            self.schema,
            pk,
            events,
            step,
            tx_id,
            snapshot=snapshot,
            created_ms=created_ms,
            first_index=first_index,
            partitioner=feed.partitioner,
        )
        out = self._out(feed.topic)
        expiry = created_ms // 1000 + feed.options.retention_ms // 1000
        partitions = feed.options.partitions
        for i, rec in enumerate(records):
            out["partition"].append(rec.partition(partitions, feed.partitioner))
            out["key"].append(None if rec.key is None else encode(rec.key))
            out["value"].append(encode(rec.value))
            out["created_ms"].append(created_ms)
            out["_seq"].append(seq)
            out["_idx"].append(first_index + i)
            out["_step"].append(step)
            out["_expiry_s"].append(expiry)
        return first_index + len(records)

    def tick(self, seq: int, now_ms: int) -> None:
        """Move the clock of feeds with barriers (a marker row, never delivered)."""
        for feed in self.feeds:
            if feed.options.barriers_interval_ms:
                out = self._out(feed.topic)
                for name, value in (
                    ("partition", TICK_PARTITION),
                    ("key", None),
                    ("value", ""),
                    ("created_ms", now_ms),
                    ("_seq", seq),
                    ("_idx", 0),
                    ("_step", now_ms),
                    ("_expiry_s", 0),
                ):
                    out[name].append(value)

    def tables(self) -> dict[str, pa.Table]:
        return {
            out: pa.table(columns, schema=STAGE_SCHEMA)
            for out, columns in self.columns.items()
            if columns["_seq"]
        }


def finalize_feeds(
    schema_of: Any,
    scans: FeedScans,
    max_seq: int,
    staged: dict[str, pa.Table],
    extra: dict[str, Any],
) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    """Dense offsets per topic partition, then barriers, for one micro-batch.

    ``extra['feeds'][output]`` keeps, per feed: ``next`` (the next offset of each partition)
    and ``barrier_step`` (the step of the last barrier). Barriers: when the batch's newest
    virtual timestamp enters a new ``BARRIERS_INTERVAL`` window and no initial scan of the
    feed is unfinished, every partition gets ``{"resolved": [step, txId]}`` -- every change
    at or below it is already in that partition, since batches commit in ingest order.
    """
    feeds_state: dict[str, Any] = dict(extra.get("feeds", {}))
    out: dict[str, pa.Table] = {}
    for stage_name in sorted(staged):
        everything = staged[stage_name]
        table = everything
        ticks = pc.equal(everything["partition"], TICK_PARTITION)
        if pc.any(ticks).as_py():
            table = table.filter(pc.invert(ticks))
        # one take of the (large) key and value columns, in the order of three integers
        order = pc.sort_indices(
            table.select(["partition", "_seq", "_idx"]),
            sort_keys=[("partition", "ascending"), ("_seq", "ascending"), ("_idx", "ascending")],
        )
        table = table.take(order)
        table_id, topic = stage_name[len(STAGE_PREFIX) :].rsplit("/", 1)
        output = feed_output(table_id, topic)
        state = dict(feeds_state.get(output, {"next": {}, "barrier_step": 0}))
        nxt: dict[str, int] = dict(state["next"])
        offsets = _dense_offsets(table.column("partition").to_numpy(), nxt)
        final = pa.table(
            {
                "partition": table["partition"],
                "offset": pa.array(offsets),
                "key": table["key"],
                "value": table["value"],
                "created_ms": table["created_ms"],
                "_seq": table["_seq"],
                "_expiry_s": table["_expiry_s"],
            },
            schema=FEED_SCHEMA,
        )
        feed = _feed(schema_of(table_id), topic)
        if feed is not None and feed.options.barriers_interval_ms and everything.num_rows:
            step = int(pc.max(everything["_step"]).as_py())
            interval = feed.options.barriers_interval_ms
            scanning = scans.get(table_id, topic) is not None and scans.scanning(
                table_id, topic, max_seq
            )
            if step // interval > int(state["barrier_step"]) // interval and not scanning:
                tx_id = int(pc.max(everything["_seq"]).as_py())
                barriers = _barriers(feed, step, tx_id, nxt)
                final = pa.concat_tables([final, barriers])
                state["barrier_step"] = step
        state["next"] = nxt
        feeds_state[output] = state
        out[output] = final
    return out, {**extra, "feeds": feeds_state}


def _dense_offsets(partitions: npt.NDArray[np.int32], nxt: dict[str, int]) -> npt.NDArray[np.int64]:
    """The offsets of records sorted by partition: each partition's continue from its next
    offset in ``nxt`` (by the partition's decimal text, as the manifest keeps it), which is
    moved past them."""
    n = len(partitions)
    offsets = np.zeros(n, np.int64)
    if not n:
        return offsets
    values, starts, counts = np.unique(partitions, return_index=True, return_counts=True)
    first = np.array([nxt.get(str(int(p)), 0) for p in values], np.int64)
    offsets[:] = np.arange(n, dtype=np.int64) - np.repeat(starts - first, counts)
    for p, base, count in zip(values.tolist(), first.tolist(), counts.tolist(), strict=True):
        nxt[str(p)] = base + count
    return offsets


def _feed(schema: TableSchema | None, topic: str) -> Feed | None:
    """The feed whose current incarnation is ``topic`` and that takes records (None: dropped
    or disabled since; a disabled feed gets no more barriers, as in YDB)."""
    if schema is None:
        return None
    for feed in active_feeds(schema):
        if feed.topic == topic:
            return feed
    return None


def _barriers(feed: Feed, step: int, tx_id: int, nxt: dict[str, int]) -> pa.Table:
    rec = barrier_record(step, tx_id)
    value = encode(rec.value)
    rows = []
    expiry = step // 1000 + feed.options.retention_ms // 1000
    for p in range(feed.options.partitions):
        offset = nxt.get(str(p), 0)
        nxt[str(p)] = offset + 1
        rows.append(
            {
                "partition": p,
                "offset": offset,
                "key": None,
                "value": value,
                "created_ms": step,
                "_seq": tx_id,
                "_expiry_s": expiry,
            }
        )
    return pa.Table.from_pylist(rows, schema=FEED_SCHEMA)
