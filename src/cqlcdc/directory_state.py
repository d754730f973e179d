"""What a data directory says about its pipeline, read from its files (or a running
engine's manifest): the committed batch, the tables with their outputs, stopped tables,
the record the pipeline stopped at, feeds with their records and their consumers' lag.

``cqlcdc status`` reads it from the files of a directory another process may be serving;
the metrics of ``cqlcdc serve --metrics`` read it at scrape time from the live catalog and
manifest. Both show the same numbers because both come from here.

>>> state = read_state(Path("cqlcdc-data"))  # doctest: +SKIP
>>> [(f.name, f.records) for f in state.feeds]  # doctest: +SKIP
[('ks.t/updates', 1200)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cqlcdc.cdc.feeds import feed_output, table_feeds
from cqlcdc.datadir.commit import Manifest
from cqlcdc.datadir.containment import StoppedTable, load_stopped, output_table_id
from cqlcdc.datadir.ingest import IngestFile
from cqlcdc.datadir.recovery import Failure, load_failure
from cqlcdc.documents import DocumentDirectory
from cqlcdc.location import Location
from cqlcdc.schema.catalog import Catalog

CONSUMERS_DIR = "consumers"  # FeedConsumer's offsets: consumers/<feed output>/<group>.json
# what a ``cqlcdc changefeed publish`` last did: publishers/<feed output>/<group>.json
PUBLISHERS_DIR = "publishers"


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """A consumer group of a feed: the offsets it committed, and how far behind the
    feed's end that is (records, summed over the partitions)."""

    group: str
    committed: int
    lag: int


@dataclass(frozen=True, slots=True)
class PublishState:
    """A publisher of a feed to a Kafka topic, as it last recorded itself: the feed
    offsets its committed transactions reached, the feed records after them (its lag), the
    failed attempts it made, the last one's error, and when it wrote this (epoch s)."""

    topic: str
    group: str
    published: int
    lag: int
    errors: int
    last_error: str
    updated_s: float
    pid: int


@dataclass(frozen=True, slots=True)
class FeedState:
    """A changefeed (``ks.table/feed``): records it ever took (the sum of its partitions'
    next offsets; retention removes old ones, never renumbers) and its consumers."""

    name: str
    output: str
    partitions: int
    records: int
    disabled: bool
    consumers: tuple[ConsumerState, ...]
    publishers: tuple[PublishState, ...] = ()


@dataclass(frozen=True, slots=True)
class TableState:
    """A live table (CDC log tables are their base table's ``log`` output): the Delta
    commits of each of its outputs (``base``, ``log``, ``feed``), and whether it is stopped."""

    name: str
    table_id: str
    commits: dict[str, int]
    stopped: StoppedTable | None


@dataclass(frozen=True, slots=True)
class DirectoryState:
    """See the module docstring. ``committed_seq``: every ingest seq up to it is applied."""

    batch_id: int
    committed_seq: int
    tables: tuple[TableState, ...]
    feeds: tuple[FeedState, ...]
    failure: Failure | None
    stopped: tuple[StoppedTable, ...] = field(default=())


def read_state(
    data_dir: Location | Path | None,
    catalog: Catalog | None = None,
    manifest: Manifest | None = None,
    stopped: dict[str, StoppedTable] | None = None,
) -> DirectoryState:
    """The state of ``data_dir``; a running engine passes its own catalog, manifest and
    stopped tables (those in memory), anything not given is read from the files. A data
    directory in an object store (``data_dir`` None) has its live state only: no consumer
    offsets, publisher positions or pipeline failure record are read; given as a Location,
    one in an object store is read whole (``cqlcdc status``)."""
    if data_dir is None and (catalog is None or manifest is None or stopped is None):
        raise ValueError("an object-store data directory needs its live state passed")
    if data_dir is not None:
        data_dir = Location.of(data_dir)
        catalog = catalog if catalog is not None else Catalog(DocumentDirectory(data_dir))
        manifest = manifest if manifest is not None else Manifest.load(data_dir)
        stopped = stopped if stopped is not None else load_stopped(data_dir)
    assert catalog is not None and manifest is not None and stopped is not None
    commits: dict[str, dict[str, int]] = {}
    for output, version in manifest.versions.items():
        table_id = output_table_id(output)
        if table_id is None:
            continue
        kind = output.split("/", 1)[0]
        per_table = commits.setdefault(table_id, {})
        # a Delta table's version n means n + 1 commits (version 0 creates it)
        per_table[kind] = per_table.get(kind, 0) + version + 1
    tables: list[TableState] = []
    feeds: list[FeedState] = []
    feed_state = manifest.extra.get("feeds", {})
    for schema in catalog.tables():
        name = f"{schema.keyspace}.{schema.name}"
        if schema.log_of is not None:  # its rows are the base table's ``log`` output
            continue
        tables.append(
            TableState(
                name,
                schema.table_id,
                commits.get(schema.table_id, {}),
                stopped.get(schema.table_id),
            )
        )
        for feed in table_feeds(schema):
            output = feed_output(schema.table_id, feed.topic)
            nxt = feed_state.get(output, {}).get("next", {})
            ends = {p: int(nxt.get(str(p), 0)) for p in range(feed.options.partitions)}
            feeds.append(
                FeedState(
                    f"{name}/{feed.name}",
                    output,
                    feed.options.partitions,
                    sum(ends.values()),
                    feed.disabled,
                    _consumers(data_dir, output, ends),
                    _publishers(data_dir, output, ends),
                )
            )
    return DirectoryState(
        batch_id=manifest.batch_id,
        committed_seq=manifest.max_seq,
        tables=tuple(tables),
        feeds=tuple(feeds),
        failure=None if data_dir is None else load_failure(data_dir),
        stopped=tuple(sorted(stopped.values(), key=lambda s: s.table)),
    )


def _documents(directory: Location) -> Iterator[tuple[str, Any]]:
    """(name without ``.json``, parsed body) of each JSON document directly in
    ``directory``; one being replaced right now is skipped (the next look sees it)."""
    try:
        names = [n for n in directory.list_names() if n.endswith(".json")]
    except OSError:
        return
    for name in names:
        try:
            text = (directory / name).read_text()
            if text is None:
                continue
            body = json.loads(text)
        except (OSError, ValueError):
            continue
        yield name[: -len(".json")], body


def _consumers(
    data_dir: Location | None, output: str, ends: dict[int, int]
) -> tuple[ConsumerState, ...]:
    """The consumer groups that committed offsets of a feed (``FeedConsumer``)."""
    if data_dir is None:
        return ()
    out = []
    for group, stored in _documents(data_dir / CONSUMERS_DIR / output):
        committed = {int(p): int(o) for p, o in stored.items()}
        lag = sum(max(end - committed.get(p, 0), 0) for p, end in ends.items())
        out.append(ConsumerState(group, sum(committed.values()), lag))
    return tuple(out)


def _publishers(
    data_dir: Location | None, output: str, ends: dict[int, int]
) -> tuple[PublishState, ...]:
    """The publishers of a feed that recorded their progress (``Publisher``)."""
    if data_dir is None:
        return ()
    out = []
    for group, stored in _documents(data_dir / PUBLISHERS_DIR / output):
        positions = {int(p): int(o) for p, o in stored.get("positions", {}).items()}
        lag = sum(max(end - positions.get(p, 0), 0) for p, end in ends.items())
        out.append(
            PublishState(
                topic=str(stored.get("topic", "")),
                group=group,
                published=sum(positions.values()),
                lag=lag,
                errors=int(stored.get("errors", 0)),
                last_error=str(stored.get("last_error", "")),
                updated_s=float(stored.get("updated_s", 0.0)),
                pid=int(stored.get("pid", 0)),
            )
        )
    return tuple(out)


def save_publish_state(
    data_dir: Location, output: str, group: str, topic: str, positions: dict[int, int],
    errors: int, last_error: str,
) -> None:  # fmt: skip
    """Record a publisher's progress for ``cqlcdc status`` and the server's metrics (the
    broker keeps the authoritative position; this is what the publisher last knew)."""
    import os
    import time

    target = data_dir.child(PUBLISHERS_DIR, output, f"{group}.json")
    target.parent.makedirs()
    body = {
        "topic": topic,
        "positions": {str(p): o for p, o in sorted(positions.items())},
        "errors": errors,
        "last_error": last_error,
        "updated_s": time.time(),
        "pid": os.getpid(),
    }
    target.write_atomically(json.dumps(body))


def ingest_backlog(files: list[IngestFile], committed_seq: int) -> tuple[int, int]:
    """(the last durable ingest seq, ingest files holding records not yet applied)."""
    last = max((f.last_seq for f in files), default=committed_seq)
    behind = sum(1 for f in files if f.last_seq > committed_seq)
    return max(last, committed_seq), behind
