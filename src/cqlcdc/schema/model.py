"""Schema objects: keyspaces, tables, columns, CDC options. Immutable; DDL builds new ones.

>>> CdcOptions(enabled=True).preimage
'false'
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Literal

from cqlcdc.types.base import CqlType

ColumnKind = Literal["partition_key", "clustering", "static", "regular"]

LOG_SUFFIX = "_scylla_cdc_log"


@dataclass(frozen=True, slots=True)
class Column:
    """A table column. ``position`` orders key columns (partition key, then clustering)."""

    name: str
    type: CqlType
    kind: ColumnKind
    position: int = 0
    descending: bool = False  # clustering columns only: CLUSTERING ORDER BY (c DESC)

    @property
    def is_key(self) -> bool:
        return self.kind in ("partition_key", "clustering")


@dataclass(frozen=True, slots=True)
class DroppedColumn:
    """A column ``ALTER TABLE ... DROP`` removed, as ScyllaDB's ``dropped_columns`` keeps it:
    its data stays in the files, and a column of the same name added later must not show
    what was written before the drop. ``timestamp`` is the drop's (``USING TIMESTAMP``, or
    the clock): cells at or below it are not the new column's."""

    name: str
    type: CqlType
    static: bool
    timestamp: int


IndexKind = Literal["regular", "values", "keys", "entries", "full"]


@dataclass(frozen=True, slots=True)
class SecondaryIndex:
    """A ``CREATE INDEX``: what of ``column`` it indexes (the ``regular`` value of an atomic
    column, the ``values`` of a list or map, the ``keys`` of a map or the elements of a set,
    the ``entries`` of a map, the ``full`` value of a frozen collection, ScyllaDB's target
    types); ``local_key`` is the partition key of
    ScyllaDB's local index (``ON t ((pk), v)``), empty for a global one."""

    name: str
    column: str
    kind: IndexKind = "regular"
    local_key: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """``system_schema.indexes``' ``target`` option, as ScyllaDB writes it."""
        inner = self.column if self.kind == "regular" else f"{self.kind}({self.column})"
        if self.local_key:
            import json

            return json.dumps({"pk": list(self.local_key), "ck": [inner]}, separators=(",", ":"))
        return inner


@dataclass(frozen=True, slots=True)
class CdcOptions:
    """``WITH cdc = {...}`` as ScyllaDB parses it (scylla-cdc-reference.md section 3).

    ``preimage`` is ``'false'``, ``'true'`` or ``'full'``; ``delta`` is ``'full'`` or ``'keys'``;
    ``ttl_s`` is the log rows' TTL (0: none). ``enabled_set`` records that the table's map
    named ``enabled`` (ScyllaDB then shows ``cdc = {...}`` in DESCRIBE even when disabled).
    """

    enabled: bool = False
    preimage: Literal["false", "true", "full"] = "false"
    postimage: bool = False
    delta: Literal["full", "keys"] = "full"
    ttl_s: int = 86400
    enabled_set: bool = False

    @property
    def declared(self) -> bool:
        """True when DESCRIBE prints the ``cdc`` option (``cdc::options::to_map`` not empty)."""
        return self.enabled or self.enabled_set

    def as_map(self) -> dict[str, str]:
        """The option map as DESCRIBE prints it."""
        return {
            "delta": self.delta,
            "enabled": "true" if self.enabled else "false",
            "postimage": "true" if self.postimage else "false",
            "preimage": self.preimage,
            "ttl": str(self.ttl_s),
        }


# how a feed made now spreads its records over its topic's partitions: YDB's MD5 of the key
# (docs/changefeeds.md, "Topics, partitions, timestamps"); older feeds have no entry (Murmur3)
FEED_PARTITIONER = "md5"


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table. ``columns`` is in definition order; helpers give the key/regular views.

    ``options`` keeps the other ``WITH`` options as CQL text (name -> literal text) so that
    DESCRIBE can print them. ``log_of`` is set on a CDC log table: the base table's name.
    ``schema_version`` grows with every ALTER, so an ingest record names the schema it was
    validated against.
    """

    keyspace: str
    name: str
    columns: tuple[Column, ...]
    cdc: CdcOptions = CdcOptions()
    options: tuple[tuple[str, str], ...] = ()
    compact_storage: bool = False
    log_of: str | None = None
    table_id: str = ""
    schema_version: int = 1
    changefeeds: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    # feed name -> the topic of this incarnation of the feed: a feed dropped and added again
    # is a new topic (YDB), never the old one's records and offsets. A feed without an entry
    # (made before topics had ids) uses its name.
    feed_topics: tuple[tuple[str, str], ...] = ()
    # feeds switched off by ALTER CHANGEFEED ... DISABLE: they take no more records, their
    # topics stay readable until DROP CHANGEFEED (YDB's state Disabled; there is no way back)
    disabled_feeds: tuple[str, ...] = ()
    # feed name -> how its records are spread over partitions ("md5": YDB's, from the MD5 of
    # the key; a feed without an entry was made before and keeps Murmur3 of the key bytes)
    feed_partitioners: tuple[tuple[str, str], ...] = ()
    indexes: tuple[SecondaryIndex, ...] = ()  # CREATE INDEX, in creation order
    dropped: tuple[DroppedColumn, ...] = ()  # the last drop of each dropped name
    # how its outputs name columns and type values (schema.physical): 2 for every table made
    # since physical names, 1 for a table made before (its names as written)
    physical_layout: int = 2
    # ScyllaDB's per-row TTL: the regular timestamp/bigint/int column whose value is the
    # row's expiration time (None: none); see cqlcdc.schema.row_ttl
    ttl_column: str | None = None
    # init=False: dataclasses.replace() must build a fresh index, not share the original's
    _by_name: dict[str, Column] = field(default_factory=dict, init=False, compare=False, repr=False)
    # the key views, computed once (they are on every write's path)
    _keys: dict[str, tuple[Column, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    # readded_at(), computed once (every state read of a table with drops asks)
    _readded: dict[str, int] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({c.name: c for c in self.columns})
        for kind in ("partition_key", "clustering"):
            self._keys[kind] = tuple(
                sorted((c for c in self.columns if c.kind == kind), key=lambda c: c.position)
            )
        self._readded.update(
            (d.name, d.timestamp)
            for d in self.dropped
            if (c := self._by_name.get(d.name)) is not None and not c.is_key
        )

    @property
    def qualified_name(self) -> str:
        return f"{self.keyspace}.{self.name}"

    def column(self, name: str) -> Column | None:
        return self._by_name.get(name)

    def dropped_column(self, name: str) -> DroppedColumn | None:
        return next((d for d in self.dropped if d.name == name), None)

    def readded_at(self) -> dict[str, int]:
        """For each value column that was dropped and added again, the last drop's
        timestamp: its cells at or below it belong to the dropped column (not to be
        changed by the caller)."""
        return self._readded

    @property
    def partition_key(self) -> tuple[Column, ...]:
        return self._keys["partition_key"]

    @property
    def clustering_key(self) -> tuple[Column, ...]:
        return self._keys["clustering"]

    @property
    def primary_key(self) -> tuple[Column, ...]:
        return self.partition_key + self.clustering_key

    @property
    def static_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.kind == "static")

    @property
    def regular_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.kind == "regular")

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """Static then regular columns, each group sorted by name (ScyllaDB's column order)."""
        return tuple(sorted(self.static_columns, key=lambda c: c.name)) + tuple(
            sorted(self.regular_columns, key=lambda c: c.name)
        )

    @property
    def select_star_columns(self) -> tuple[Column, ...]:
        """``SELECT *`` order: partition key, clustering key, static then regular columns
        (each group sorted by name), as ScyllaDB's ``all_columns_in_select_order``."""
        return self.primary_key + self.value_columns


@dataclass(frozen=True, slots=True)
class Keyspace:
    name: str
    replication: tuple[tuple[str, str], ...] = (
        ("class", "SimpleStrategy"),
        ("replication_factor", "1"),
    )
    durable_writes: bool = True


def legacy_table_id(keyspace: str, name: str) -> uuid.UUID:
    """``generate_legacy_id``: a system table's id, the name-based (v3) UUID of ks + name."""
    digest = hashlib.md5((keyspace + name).encode(), usedforsecurity=False).digest()
    return uuid.UUID(bytes=digest, version=3)


def table_uuid(table: TableSchema) -> uuid.UUID:
    """A table's id as a UUID (system tables are named by ``ks.name``, not by a UUID)."""
    try:
        return uuid.UUID(table.table_id)
    except ValueError:
        return legacy_table_id(table.keyspace, table.name)
