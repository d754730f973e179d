"""What a statement returns: ``Rows`` of ``Row`` tuples with the cassandra-driver's shape
(``column_names``, access by name), the columns' CQL types and DESCRIBE text. Both the
embedded ``Session`` and the ``--connect`` client (``cqlcdc.remote``) return these.

>>> Row(("pk", "v"), (1, "one")).v
'one'
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from cqlcdc.schema.changes import SchemaEvent
    from cqlcdc.storage.select import ResultSet


class Row(tuple[Any, ...]):
    """A result row: a tuple with access by column name (``row.pk`` or ``row["cdc$time"]``)."""

    _names: tuple[str, ...] = ()

    def __new__(cls, names: tuple[str, ...], values: Sequence[Any]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._names.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._names, self, strict=True))


class Rows:
    """What ``execute()`` returns: iterable rows plus ``column_names`` (cassandra-driver shape).

    ``column_types`` holds the CQL type of each column (for cqlsh-style printing);
    ``describe`` is the text of a DESCRIBE statement. ``table``: the rows as Arrow columns
    when a columnar read answered (the server encodes its pages from them); they become
    ``Row`` objects only when iterated. ``schema_changes``: what a DDL statement changed
    (each table, its CDC log's included), in the order ScyllaDB announces it.
    """

    def __init__(
        self,
        result: ResultSet | None = None,
        describe: str | None = None,
        schema_changes: tuple[SchemaEvent, ...] = (),
    ) -> None:
        self.schema_changes = schema_changes
        self.table: pa.Table | None = None
        self._result: ResultSet | None = None
        self._built: list[Row] | None
        if describe is not None:
            self.column_names: list[str] = ["describe"]
            self.column_types: list[Any] = [None]
            self._built = [Row(("describe",), (describe,))]
        elif result is not None:
            self.column_names = list(result.columns)
            self.column_types = list(result.types)
            self.table = result.table
            self._result, self._built = result, None
        else:
            self.column_names, self.column_types, self._built = [], [], []
        self.describe = describe

    @property
    def _rows(self) -> list[Row]:
        if self._built is None:
            assert self._result is not None
            names = tuple(self._result.columns)
            self._built = [Row(names, r) for r in self._result.value_rows()]
            self._result = None
        return self._built

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def __len__(self) -> int:
        if self._built is None and self.table is not None:
            return int(self.table.num_rows)
        return len(self._rows)

    def all(self) -> list[Row]:
        return list(self._rows)

    def one(self) -> Row | None:
        return self._rows[0] if self._rows else None

    @property
    def current_rows(self) -> list[Row]:
        return self._rows

    @property
    def is_write(self) -> bool:
        return not self.column_names


__all__ = ["Row", "Rows"]
