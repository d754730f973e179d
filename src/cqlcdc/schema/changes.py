"""What a DDL statement changed, as the schema-change events ScyllaDB sends for it.

A driver refreshes only what an event names: gocql (and so ScyllaDB's CDC libraries) learns
of a table only from a ``SCHEMA_CHANGE`` naming it. ScyllaDB announces every table a DDL
touches, the CDC log its listener creates, alters or drops with the base
(``cdc/log.cc``) included, so the events are the difference between the catalog before and
after the statement, in the order ``schema_applier::post_commit`` notifies them: keyspaces
(created, altered, dropped), user types (likewise), then tables: dropped bases, dropped CDC
logs, created bases, created logs, altered bases, altered logs (``notify_tables_and_views``).

>>> from cqlcdc.cql import parse_statement
>>> from cqlcdc.schema.catalog import Catalog
>>> before = Catalog(None)
>>> before.execute(parse_statement(
...     "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
...     "'replication_factor': 1}"), None)
>>> after = before.copy()
>>> after.execute(parse_statement(
...     "CREATE TABLE ks.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"), None)
>>> [(e.change, e.name) for e in schema_changes(before, after)]
[('CREATED', 't'), ('CREATED', 't_scylla_cdc_log')]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cqlcdc.schema.model import TableSchema

if TYPE_CHECKING:
    from cqlcdc.schema.catalog import Catalog

Change = Literal["CREATED", "UPDATED", "DROPPED"]
Target = Literal["KEYSPACE", "TYPE", "TABLE"]


@dataclass(frozen=True, slots=True)
class SchemaEvent:
    """One schema change (the body of a ``SCHEMA_CHANGE`` event); ``name`` is empty for a
    keyspace."""

    change: Change
    target: Target
    keyspace: str
    name: str = ""


def schema_changes(before: Catalog, after: Catalog) -> tuple[SchemaEvent, ...]:
    """The events of the DDL that made ``after`` from ``before``, in ScyllaDB's order."""
    events: list[SchemaEvent] = []
    old_ks = {(k.name, ""): k for k in before.keyspaces()}
    new_ks = {(k.name, ""): k for k in after.keyspaces()}
    events += _diff("KEYSPACE", old_ks, new_ks)
    events += _diff("TYPE", _types(before), _types(after))
    old = {(t.keyspace, t.name): t for t in before.tables()}
    new = {(t.keyspace, t.name): t for t in after.tables()}
    dropped = [t for key, t in old.items() if key not in new or new[key].table_id != t.table_id]
    created = [t for key, t in new.items() if key not in old or old[key].table_id != t.table_id]
    altered = [
        t
        for key, t in new.items()
        if key in old and old[key].table_id == t.table_id and _altered(old, new, key)
    ]
    groups: tuple[tuple[Change, list[TableSchema]], ...] = (
        ("DROPPED", dropped),
        ("CREATED", created),
        ("UPDATED", altered),
    )
    for change, tables in groups:
        for is_log in (False, True):  # bases, then CDC logs
            events += [
                SchemaEvent(change, "TABLE", t.keyspace, t.name)
                for t in tables
                if (t.log_of is not None) == is_log
            ]
    return tuple(events)


def _altered(
    old: Mapping[tuple[str, str], TableSchema],
    new: Mapping[tuple[str, str], TableSchema],
    key: tuple[str, str],
) -> bool:
    """A new version of the table; for a CDC log, also any change of its base while CDC is
    on: ScyllaDB's listener rewrites the log with every such base change
    (``on_before_update_column_family``), columns or not."""
    table = new[key]
    if old[key].schema_version != table.schema_version:
        return True
    if table.log_of is None:
        return False
    base_key = (table.keyspace, table.log_of)
    base = new.get(base_key)
    previous = old.get(base_key)
    return (
        base is not None
        and previous is not None
        and base.table_id == previous.table_id
        and base.schema_version != previous.schema_version
        and base.cdc.enabled
    )


def _types(catalog: Catalog) -> dict[tuple[str, str], object]:
    return {(k.name, t.name): t for k in catalog.keyspaces() for t in catalog.user_types(k.name)}


def _diff(
    target: Target, old: Mapping[tuple[str, str], object], new: Mapping[tuple[str, str], object]
) -> list[SchemaEvent]:
    """Created, altered, dropped (``post_commit``'s order), each in name order."""
    created = [SchemaEvent("CREATED", target, ks, n) for ks, n in sorted(new) if (ks, n) not in old]
    altered = [
        SchemaEvent("UPDATED", target, ks, n)
        for ks, n in sorted(new)
        if (ks, n) in old and old[ks, n] != new[ks, n]
    ]
    dropped = [SchemaEvent("DROPPED", target, ks, n) for ks, n in sorted(old) if (ks, n) not in new]
    return created + altered + dropped


__all__ = ["SchemaEvent", "schema_changes"]
