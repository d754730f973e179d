"""The system keyspaces and their tables, as DESCRIBE sees them beside the catalog's.

The catalog holds only user keyspaces; the system ones are declared by
``cqlcdc.system.tables`` (a layer above this one), which builds a ``SystemCatalog`` of
them. ScyllaDB describes a system keyspace like any other (``describe_statement.cc`` finds
every keyspace in the database), and clients rely on it: gocql sends ``DESCRIBE KEYSPACE ks
WITH INTERNALS`` whenever it loads a keyspace's metadata, ``system_distributed`` included
(where ScyllaDB's CDC libraries read the stream generations).

>>> from cqlcdc.schema.model import Column, Keyspace, TableSchema
>>> from cqlcdc.types import native_type
>>> local = TableSchema("system", "local", (Column("key", native_type("text"), "partition_key"),))
>>> system = SystemCatalog((Keyspace("system"), Keyspace("system_auth")), (local,))
>>> system.names()
{'system': ['local'], 'system_auth': []}
>>> system.table("system", "local") is local, system.keyspace("nope")
(True, None)
"""

from __future__ import annotations

from dataclasses import dataclass

from cqlcdc.schema.model import Keyspace, TableSchema


@dataclass(frozen=True, slots=True)
class SystemCatalog:
    """The system keyspaces and the tables they hold (read-only: no DDL changes them)."""

    keyspaces: tuple[Keyspace, ...]
    tables: tuple[TableSchema, ...]

    def keyspace(self, name: str) -> Keyspace | None:
        return next((k for k in self.keyspaces if k.name == name), None)

    def tables_of(self, keyspace: str) -> tuple[TableSchema, ...]:
        """A system keyspace's tables, by name (DESCRIBE's order)."""
        return tuple(sorted((t for t in self.tables if t.keyspace == keyspace), key=_name))

    def table(self, keyspace: str, name: str) -> TableSchema | None:
        return next((t for t in self.tables_of(keyspace) if t.name == name), None)

    def names(self) -> dict[str, list[str]]:
        """Each system keyspace and its tables' names (DESC KEYSPACES / TABLES list them)."""
        listed: dict[str, list[str]] = {k.name: [] for k in self.keyspaces}
        for table in self.tables:
            listed.setdefault(table.keyspace, []).append(table.name)
        return listed


def _name(table: TableSchema) -> str:
    return table.name


__all__ = ["SystemCatalog"]
