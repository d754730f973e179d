"""The live view of a partition: what a read at ``now_s`` sees, column by column.

Values come out as the type's Python value; a non-frozen collection is "frozen" from its live
cells. With ``lists_as_maps`` a non-frozen list is shown keyed by its timeuuids, which is how
CDC images show lists (preimages spec, "Preimages and non-atomic columns").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.schema.row_ttl import is_expired
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.types import ListType, MapType, SetType, UserType
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import MapValue, UdtValue


@dataclass(frozen=True, slots=True)
class LiveRow:
    """A row as a read returns it: clustering key and the live values of its columns."""

    ck: ClusteringKey | None  # None: the static row
    values: dict[str, Any]
    cells: dict[str, Cell]  # the live atomic cells (for writetime()/ttl())
    # the live element cells of non-frozen collections and UDTs, by key (a UDT's by field
    # index), for WRITETIME(m[k]) / TTL(u.f)
    elements: dict[str, dict[Any, Cell]] = field(default_factory=dict)


def collection_value(
    ctype: CqlType, elements: dict[Any, Cell], *, lists_as_maps: bool = False
) -> Any:
    """Freeze the live element cells of a non-frozen collection/UDT into one value."""
    if not elements:
        return None
    if isinstance(ctype, SetType):
        return frozenset(elements)
    if isinstance(ctype, MapType):
        return MapValue({k: c.value for k, c in elements.items()}, sort_key=ctype.key.sort_key)
    if isinstance(ctype, ListType):
        keys = sorted(elements, key=lambda u: (u.time, u.bytes))
        if lists_as_maps:
            return MapValue([(k, elements[k].value) for k in keys])
        return tuple(elements[k].value for k in keys)
    if isinstance(ctype, UserType):
        return UdtValue(
            ctype.field_names, {ctype.field_names[i]: c.value for i, c in elements.items()}
        )
    raise TypeError(f"not a multi-cell type: {ctype.cql_name}")


def list_map_type(ltype: ListType) -> MapType:
    """``list<T>`` seen as the ``map<timeuuid, T>`` it is underneath."""
    from cqlcdc.types import native_type

    return MapType(native_type("timeuuid"), ltype.element, frozen=True)


def row_values(
    row: Row,
    columns: tuple[Column, ...],
    shadow: int | None,
    now_s: int,
    *,
    lists_as_maps: bool = False,
    elements: dict[str, dict[Any, Cell]] | None = None,
) -> tuple[dict[str, Any], dict[str, Cell]]:
    """The live values of ``columns`` in ``row`` given the covering tombstone ``shadow``
    (and, into ``elements`` when given, the live element cells of each collection)."""
    values: dict[str, Any] = {}
    cells: dict[str, Cell] = {}
    for col in columns:
        data = row.cells.get(col.name)
        if data is None:
            continue
        if isinstance(data, CounterCell):
            if shadow is None or data.timestamp > shadow:
                values[col.name] = data.value
        elif isinstance(data, Cell):
            if data.is_live(now_s) and (shadow is None or data.timestamp > shadow):
                values[col.name] = data.value
                cells[col.name] = data
        elif isinstance(data, CollectionCells):
            live = data.live_elements(now_s, shadow)
            if live:
                values[col.name] = collection_value(col.type, live, lists_as_maps=lists_as_maps)
                if elements is not None:
                    elements[col.name] = live
    return values, cells


def row_is_live(row: Row, shadow: int | None, now_s: int) -> bool:
    """A row exists if its marker or any cell is live and not shadowed (basic operations)."""
    if (
        row.marker is not None
        and row.marker.is_live(now_s)
        and (shadow is None or row.marker.timestamp > shadow)
    ):
        return True
    for data in row.cells.values():
        if isinstance(data, Cell | CounterCell):
            if data.is_live(now_s) and (shadow is None or data.timestamp > shadow):
                return True
        elif data.live_elements(now_s, shadow):
            return True
    return False


class PartitionView:
    """Reads a partition's live content for one table schema at one moment."""

    def __init__(
        self, schema: TableSchema, order: ClusteringOrder | None = None, expire_rows: bool = True
    ) -> None:
        """``expire_rows``: hide rows past their per-row TTL (reads do; the log's images
        show them until the expiration deletion, as ScyllaDB's do)."""
        self.schema = schema
        self.expire_rows = expire_rows
        self.order = order or ClusteringOrder(schema)
        self.statics = schema.static_columns
        self.regulars = schema.regular_columns
        ttl = None if schema.ttl_column is None else schema.column(schema.ttl_column)
        # the per-row TTL column and its type name (cqlcdc.schema.row_ttl)
        self.row_ttl = None if ttl is None else (ttl.name, ttl.type.cql_name)

    def static_row(
        self, part: Partition, now_s: int, *, lists_as_maps: bool = False
    ) -> LiveRow | None:
        """The static row if it has a live static cell (the static row spec)."""
        if not self.statics:
            return None
        elements: dict[str, dict[Any, Cell]] = {}
        values, cells = row_values(
            part.static,
            self.statics,
            part.deletion,
            now_s,
            lists_as_maps=lists_as_maps,
            elements=elements,
        )
        if not values:
            return None
        return LiveRow(None, values, cells, elements)

    def clustering_row(
        self, part: Partition, ck: ClusteringKey, now_s: int, *, lists_as_maps: bool = False
    ) -> LiveRow | None:
        row = part.rows.get(ck)
        if row is None:
            return None
        shadow = part.row_shadow(ck, self.order)
        if not row_is_live(row, shadow, now_s):
            return None
        elements: dict[str, dict[Any, Cell]] = {}
        values, cells = row_values(
            row, self.regulars, shadow, now_s, lists_as_maps=lists_as_maps, elements=elements
        )
        if (
            self.expire_rows
            and self.row_ttl is not None
            and is_expired(values.get(self.row_ttl[0]), self.row_ttl[1], now_s)
        ):
            # past its per-row TTL: gone, as ScyllaDB's expiration scanner deletes it
            return None
        return LiveRow(ck, values, cells, elements)

    def clustering_rows(self, part: Partition, now_s: int) -> Iterator[LiveRow]:
        for ck in self.order.sorted(list(part.rows)):
            live = self.clustering_row(part, ck, now_s)
            if live is not None:
                yield live
