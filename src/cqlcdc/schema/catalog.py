"""The schema catalog: keyspaces, user types, tables and their CDC logs, every table version.

DDL statements (AST nodes) go through ``Catalog.execute``; rules and messages follow
ScyllaDB. After each successful DDL the catalog is saved to ``<data_dir>/catalog.json``.

>>> from cqlcdc.cql import ast
>>> cat = Catalog(None)
>>> replication = (("class", "SimpleStrategy"), ("replication_factor", "1"))
>>> cat.execute(ast.CreateKeyspace("ks", replication), None)
>>> cat.keyspace("ks").name
'ks'
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.directory import Directory
from cqlcdc.errors import AlreadyExists, ConfigurationError, InvalidRequest, Unauthorized
from cqlcdc.schema import persist, table_ddl
from cqlcdc.schema.cdc_options import parse_cdc_options
from cqlcdc.schema.indexes import new_index
from cqlcdc.schema.log_table import (
    base_name,
    check_cdc_supported,
    is_log_name,
    log_column_change_message,
    log_columns,
    log_exists_message,
    log_name,
)
from cqlcdc.schema.log_table import log_table_schema as derive_log_schema
from cqlcdc.schema.model import (
    FEED_PARTITIONER,
    Column,
    DroppedColumn,
    Keyspace,
    TableSchema,
)
from cqlcdc.schema.row_ttl import set_ttl_column
from cqlcdc.schema.table_options import merge_options, validate_table_options
from cqlcdc.schema.tablets import check_vnodes
from cqlcdc.schema.typeshape import (
    references_udt,
    substitute_udt,
    type_from_json,
    type_to_json,
)
from cqlcdc.types import UserType, resolve_type
from cqlcdc.types.base import CqlType

# ScyllaDB's, and cqlcdc's system_cqlcdc (changefeed topics over CQL)
SYSTEM_KEYSPACES = frozenset(
    {
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
        "system_traces",
        "system_virtual_schema",
        "system_cqlcdc",
    }
)
_STRATEGIES = ("SimpleStrategy", "NetworkTopologyStrategy", "EverywhereStrategy", "LocalStrategy")
# the one data centre of this node (system.local's data_center, as ScyllaDB's SimpleSnitch)
DATACENTER = "datacenter1"
_NO_KEYSPACE = (
    "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
)


class Catalog:
    """Keyspaces, user types and tables; persisted to ``data_dir`` when one is given.

    Every table version stays retrievable by ``(table_id, schema_version)``, also after the
    table is dropped, so records validated against an old schema can still be processed.
    """

    def __init__(self, data_dir: Directory | None = None) -> None:
        # where the catalog is saved (``cqlcdc.documents.DocumentDirectory``), None: nowhere
        self.data_dir = data_dir
        self._keyspaces: dict[str, Keyspace] = {}
        self._types: dict[str, dict[str, UserType]] = {}
        self._tables: dict[str, dict[str, str]] = {}  # keyspace -> name -> table_id
        self._versions: dict[str, list[TableSchema]] = {}  # table_id -> versions 1..n
        # checks every new table version before it is recorded (the coordinator's: every
        # output can hold it, ``cqlcdc.pipeline.admission``); raising refuses the DDL
        self.admission: Callable[[TableSchema], None] | None = None
        if self.data_dir is not None:
            self._load(self.data_dir)

    # -- lookups ---------------------------------------------------------------------------

    def keyspace(self, name: str) -> Keyspace | None:
        return self._keyspaces.get(name)

    def keyspaces(self) -> tuple[Keyspace, ...]:
        return tuple(self._keyspaces[k] for k in sorted(self._keyspaces))

    def user_type(self, keyspace: str, name: str) -> UserType | None:
        """The current definition of a user type (non-frozen form; field index = position)."""
        return self._types.get(keyspace, {}).get(name)

    def user_types(self, keyspace: str) -> tuple[UserType, ...]:
        """The keyspace's types, each after the types it uses (DESCRIBE order)."""
        ordered: list[UserType] = []
        types = self._types.get(keyspace, {})

        def visit(t: UserType) -> None:
            if t in ordered:
                return
            for other in sorted(types):
                if other != t.name and references_udt(t, keyspace, other):
                    visit(types[other])
            ordered.append(t)

        for name in sorted(types):
            visit(types[name])
        return tuple(ordered)

    def table(self, keyspace: str, name: str) -> TableSchema | None:
        """The current schema of a table or CDC log table (attached or detached)."""
        table_id = self._tables.get(keyspace, {}).get(name)
        return None if table_id is None else self._versions[table_id][-1]

    def table_by_id(self, table_id: str, version: int | None = None) -> TableSchema | None:
        """A table version (the newest when ``version`` is None), dropped tables included."""
        versions = self._versions.get(table_id)
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return versions[version - 1] if 1 <= version <= len(versions) else None

    def tables(self, keyspace: str | None = None) -> tuple[TableSchema, ...]:
        """Live tables (log tables included), by keyspace then name."""
        names = [keyspace] if keyspace is not None else sorted(self._tables)
        return tuple(
            self._versions[ids[n]][-1]
            for ks in names
            for ids in [self._tables.get(ks, {})]
            for n in sorted(ids)
        )

    def log_table(self, base: TableSchema) -> TableSchema | None:
        """The CDC log of ``base`` while it exists (attached or detached)."""
        log = self.table(base.keyspace, log_name(base.name))
        return log if log is not None and log.log_of == base.name else None

    def is_attached_log(self, keyspace: str, name: str) -> bool:
        """``cdc::is_log_for_some_table``: a log name whose base exists with CDC enabled."""
        if not is_log_name(name):
            return False
        base = self.table(keyspace, base_name(name))
        return base is not None and base.cdc.enabled

    # -- execution -------------------------------------------------------------------------

    def execute(self, stmt: ast.Statement, current_keyspace: str | None) -> None:
        """Apply a DDL statement.

        DESCRIBE is not one: it reads the catalog (``describe.describe_statement``), which
        sits above this module, so the catalog never imports how it is described.

        Raises:
            InvalidRequest, ConfigurationError, AlreadyExists, Unauthorized, CqlSyntaxError:
                the statement breaks a schema rule (ScyllaDB's messages).
        """
        handler = self._HANDLERS.get(type(stmt))
        if handler is None:
            raise InvalidRequest(f"{type(stmt).__name__} is not a schema statement")
        if handler(self, stmt, current_keyspace):
            self._save()

    def _ks(self, name: ast.QualifiedName, current: str | None) -> str:
        keyspace = name.keyspace or current
        if keyspace is None:
            raise InvalidRequest(_NO_KEYSPACE)
        return keyspace

    def existing_table(self, name: ast.QualifiedName, current: str | None) -> TableSchema:
        """The table a statement names (``current``: the session's keyspace), or ScyllaDB's
        error for a missing keyspace or table."""
        keyspace = self._ks(name, current)
        if keyspace not in self._keyspaces:
            raise InvalidRequest(f"Keyspace {keyspace} does not exist")
        table = self.table(keyspace, name.name)
        if table is None:
            raise InvalidRequest(f"unconfigured table {name.name}")
        return table

    # -- keyspaces -------------------------------------------------------------------------

    def _create_keyspace(self, stmt: ast.CreateKeyspace, current: str | None) -> bool:
        if stmt.name.lower() in SYSTEM_KEYSPACES:
            raise InvalidRequest("system keyspace is not user-modifiable")
        table_ddl.validate_name(stmt.name, "keyspace")
        replication = _replication(stmt.replication)
        check_vnodes(stmt.tablets, altering=False)
        if stmt.name in self._keyspaces:
            if stmt.if_not_exists:
                return False
            raise AlreadyExists(f'Cannot add existing keyspace "{stmt.name}"', keyspace=stmt.name)
        self._keyspaces[stmt.name] = Keyspace(stmt.name, replication, stmt.durable_writes)
        self._types[stmt.name] = {}
        self._tables[stmt.name] = {}
        return True

    def _alter_keyspace(self, stmt: ast.AlterKeyspace, current: str | None) -> bool:
        ks = self._keyspaces.get(stmt.name)
        if ks is None:
            raise InvalidRequest(f"Unknown keyspace {stmt.name}")
        check_vnodes(stmt.tablets, altering=True)
        replication = _replication(stmt.replication) if stmt.replication else ks.replication
        durable = ks.durable_writes if stmt.durable_writes is None else stmt.durable_writes
        self._keyspaces[stmt.name] = Keyspace(stmt.name, replication, durable)
        return True

    def _drop_keyspace(self, stmt: ast.DropKeyspace, current: str | None) -> bool:
        if stmt.name not in self._keyspaces:
            if stmt.if_exists:
                return False
            raise ConfigurationError(f"Cannot drop non existing keyspace '{stmt.name}'.")
        del self._keyspaces[stmt.name]
        self._types.pop(stmt.name, None)
        self._tables.pop(stmt.name, None)  # table versions stay retrievable by id
        return True

    def _use(self, stmt: ast.UseKeyspace, current: str | None) -> bool:
        if stmt.name not in self._keyspaces:
            raise InvalidRequest(f"Keyspace '{stmt.name}' does not exist")
        return False

    # -- user types ------------------------------------------------------------------------

    def _lookup_udt(self, keyspace: str, name: str) -> UserType | None:
        return self.user_type(keyspace, name)

    def _resolver(self, keyspace: str) -> Callable[[ast.TypeRef], CqlType]:
        return lambda ref: resolve_type(ref, keyspace, self._lookup_udt)

    def _udt_keyspace(self, name: ast.QualifiedName, current: str | None) -> str:
        return self._ks(name, current)

    def _create_type(self, stmt: ast.CreateType, current: str | None) -> bool:
        keyspace = self._udt_keyspace(stmt.name, current)
        if keyspace not in self._keyspaces:
            raise InvalidRequest(f"Can't find a keyspace {keyspace}")
        resolve = self._resolver(keyspace)
        types = tuple(resolve(t) for _, t in stmt.fields)
        for t in types:
            _check_field_type(t)
        if stmt.name.name in self._types[keyspace]:
            if stmt.if_not_exists:
                return False
            raise InvalidRequest(f"A user type of name {keyspace}.{stmt.name.name} already exists")
        names = tuple(f for f, _ in stmt.fields)
        _check_duplicate_fields(names, stmt.name.name)
        self._types[keyspace][stmt.name.name] = UserType(
            keyspace, stmt.name.name, names, types, frozen=False
        )
        return True

    def _alter_type(self, stmt: ast.AlterType, current: str | None) -> bool:
        keyspace = self._udt_keyspace(stmt.name, current)
        if keyspace not in self._keyspaces:
            raise InvalidRequest(f"Cannot alter type in unknown keyspace {keyspace}")
        qualified = f"{keyspace}.{stmt.name.name}"
        old = self._types[keyspace].get(stmt.name.name)
        if old is None:
            raise InvalidRequest(f"No user type named {qualified} exists.")
        names, types = list(old.field_names), list(old.field_types)
        # any change of a type a partition key uses (ADD or RENAME: ScyllaDB checks both,
        # with one message) would change how existing keys read
        for table in self.tables(keyspace):
            for c in table.partition_key:
                if references_udt(c.type, keyspace, old.name):
                    raise InvalidRequest(
                        f"Cannot add new field to type {qualified} because it is used in "
                        f"the partition key column {c.name} of table {table.qualified_name}"
                    )
        if stmt.add is not None:
            field, ref = stmt.add
            if field in names:
                raise InvalidRequest(
                    f"Cannot add new field {field} to type {qualified}: "
                    "a field of the same name already exists"
                )
            t = self._resolver(keyspace)(ref)
            _check_field_type(t)
            if references_udt(t, keyspace, old.name):
                raise InvalidRequest(
                    f"Cannot add new field {field} of type {t.cql_name} to type {qualified} "
                    "as this would create a circular reference"
                )
            names.append(field)  # a new field takes the next index: indices never move
            types.append(t)
        for src, dst in stmt.renames:
            if src not in names:
                raise InvalidRequest(f"Unknown field {src} in type {qualified}")
            names[names.index(src)] = dst  # a renamed field keeps its index
        _check_duplicate_fields(tuple(names), old.name)
        self._replace_udt(UserType(keyspace, old.name, tuple(names), tuple(types), frozen=False))
        return True

    def _replace_udt(self, new: UserType) -> None:
        """Store ``new`` and carry it into every type and table that uses it."""
        keyspace = new.keyspace
        pending = [new]
        while pending:
            changed = pending.pop()
            self._types[keyspace][changed.name] = changed
            for other in list(self._types[keyspace].values()):
                if other.name != changed.name and references_udt(other, keyspace, changed.name):
                    updated = substitute_udt(other, changed)
                    assert isinstance(updated, UserType)
                    pending.append(updated)
            for table in self.tables(keyspace):
                columns = tuple(
                    replace(c, type=substitute_udt(c.type, changed)) for c in table.columns
                )
                if columns != table.columns:
                    self._put(replace(table, columns=columns))

    def _drop_type(self, stmt: ast.DropType, current: str | None) -> bool:
        keyspace = self._udt_keyspace(stmt.name, current)
        if keyspace not in self._keyspaces:
            raise InvalidRequest(f"Cannot drop type in unknown keyspace {keyspace}")
        name = stmt.name.name
        if name not in self._types[keyspace]:
            if stmt.if_exists:
                return False
            raise InvalidRequest(f"No user type named {keyspace}.{name} exists.")
        for other in self.user_types(keyspace):
            if other.name != name and references_udt(other, keyspace, name):
                raise InvalidRequest(
                    f"Cannot drop user type {keyspace}.{name} as it is still used by user type "
                    f"{other.name}"
                )
        for table in sorted(self.tables(keyspace), key=lambda t: (t.log_of is not None, t.name)):
            if any(references_udt(c.type, keyspace, name) for c in table.columns):
                raise InvalidRequest(
                    f"Cannot drop user type {keyspace}.{name} as it is still used by table "
                    f"{table.qualified_name}"
                )
        del self._types[keyspace][name]
        return True

    # -- tables ----------------------------------------------------------------------------

    def _put(self, table: TableSchema) -> TableSchema:
        """Record a new version of ``table`` (a new table when its id is new)."""
        if self.admission is not None:
            self.admission(table)
        if not table.table_id:
            table = replace(table, table_id=str(uuid.uuid4()), schema_version=1)
            self._versions[table.table_id] = [table]
        else:
            versions = self._versions[table.table_id]
            table = replace(table, schema_version=versions[-1].schema_version + 1)
            versions.append(table)
        self._tables[table.keyspace][table.name] = table.table_id
        return table

    def _create_table(self, stmt: ast.CreateTable, current: str | None) -> bool:
        keyspace = self._ks(stmt.name, current)
        table_ddl.validate_name(stmt.name.name, "table")
        options = validate_table_options(stmt.options)
        cdc = parse_cdc_options(dict(stmt.options).get("cdc"))
        if keyspace not in self._keyspaces:
            raise InvalidRequest(f"Cannot create a table in a non-existent keyspace: {keyspace}")
        default_ttl = int(dict(options).get("default_time_to_live", "0"))
        table = table_ddl.build_table(stmt, keyspace, self._resolver(keyspace), default_ttl)
        if self.table(keyspace, table.name) is not None:
            if stmt.if_not_exists:
                return False
            raise AlreadyExists(
                f'Cannot add already existing table "{table.name}" to keyspace "{keyspace}"',
                keyspace=keyspace,
                table=table.name,
            )
        table = replace(table, options=options, cdc=cdc)
        if cdc.enabled:
            if self.table(keyspace, log_name(table.name)) is not None:
                raise InvalidRequest(log_exists_message(table))
            check_cdc_supported(table)
        table = self._put(table)
        if cdc.enabled:
            self._sync_log(table)
        return True

    def _sync_log(self, base: TableSchema) -> None:
        """Create or re-attach ``base``'s log, its columns following the base's."""
        log = self.log_table(base)
        if log is None:
            self._put(derive_log_schema(base))
            return
        columns = log_columns(base)
        if columns != log.columns:
            self._put(replace(log, columns=columns, dropped=_log_dropped(base, log, columns)))

    def _alter_table(self, stmt: ast.AlterTable, current: str | None) -> bool:
        table = self.existing_table(stmt.name, current)
        action = stmt.action
        attached = self.is_attached_log(table.keyspace, table.name)
        if table.log_of is not None and isinstance(
            action, ast.AddColumns | ast.DropColumns | ast.AlterColumnType | ast.RenameColumns
        ):
            raise InvalidRequest(log_column_change_message(action, attached))
        resolve = self._resolver(table.keyspace)
        if isinstance(action, ast.AddColumns):
            new = table_ddl.add_columns(table, action, resolve)
        elif isinstance(action, ast.DropColumns):
            for name in action.columns:
                dependent = [i.name for i in table.indexes if i.column == name]
                if dependent:
                    raise InvalidRequest(
                        f"Cannot drop column {name} because it has dependent secondary "
                        f"indexes ({', '.join(dependent)})"
                    )
            new = table_ddl.drop_columns(table, action)
        elif isinstance(action, ast.RenameColumns):
            new = table_ddl.rename_columns(table, action)
        elif isinstance(action, ast.AlterColumnType):
            new = table_ddl.alter_column_type(table, action, resolve)
        elif isinstance(action, ast.SetOptions):
            new = self._set_options(table, action, attached)
        elif isinstance(action, ast.SetTtlColumn):
            new = set_ttl_column(table, action)
        elif isinstance(action, ast.AddChangefeed):
            if any(name == action.name for name, _ in table.changefeeds):
                raise InvalidRequest(
                    f"Changefeed {action.name} already exists in table {table.qualified_name}"
                )
            feed = (action.name, tuple((k, _option_text(v)) for k, v in action.options))
            topic = (action.name, f"{action.name}.{uuid.uuid4().hex[:12]}")
            new = replace(
                table,
                changefeeds=(*table.changefeeds, feed),
                feed_topics=(*(t for t in table.feed_topics if t[0] != action.name), topic),
                feed_partitioners=(
                    *(p for p in table.feed_partitioners if p[0] != action.name),
                    (action.name, FEED_PARTITIONER),
                ),
            )
        elif isinstance(action, ast.DisableChangefeed):
            self._existing_feed(table, action.name)
            if action.name in table.disabled_feeds:
                # YDB: only a Ready feed can be disabled
                raise InvalidRequest(
                    f"Cannot switch state of changefeed {action.name}: from Disabled to Disabled"
                )
            new = replace(table, disabled_feeds=(*table.disabled_feeds, action.name))
        else:
            self._existing_feed(table, action.name)
            new = replace(
                table,
                changefeeds=tuple(f for f in table.changefeeds if f[0] != action.name),
                feed_topics=tuple(t for t in table.feed_topics if t[0] != action.name),
                disabled_feeds=tuple(f for f in table.disabled_feeds if f != action.name),
                feed_partitioners=tuple(p for p in table.feed_partitioners if p[0] != action.name),
            )
        new = self._put(new)
        if new.cdc.enabled:
            self._sync_log(new)
        return True

    @staticmethod
    def _existing_feed(table: TableSchema, name: str) -> None:
        if all(feed != name for feed, _ in table.changefeeds):
            raise InvalidRequest(
                f"Changefeed {name} does not exist in table {table.qualified_name}"
            )

    def _set_options(
        self, table: TableSchema, action: ast.SetOptions, attached: bool
    ) -> TableSchema:
        options = validate_table_options(action.options, altering=True)
        cdc = table.cdc
        cdc_term = dict(action.options).get("cdc")
        if cdc_term is not None:
            cdc = parse_cdc_options(cdc_term)
            if not cdc.enabled_set:
                raise InvalidRequest('Altering CDC options requires specifying "enabled" flag')
        default_ttl = int(dict(options).get("default_time_to_live", "0"))
        if default_ttl > 0 and table_ddl.is_counter_table(table.columns):
            raise InvalidRequest("Cannot set default_time_to_live on a table with counters")
        if table.log_of is not None and "'mode': 'repair'" in dict(options).get("tombstone_gc", ""):
            raise InvalidRequest(
                "The 'repair' mode for tombstone_gc is not allowed on CDC log tables."
            )
        if cdc.enabled:
            existing = self.table(table.keyspace, log_name(table.name))
            if not table.cdc.enabled and existing is not None and existing.log_of != table.name:
                raise InvalidRequest(log_exists_message(table))
            if attached:
                raise InvalidRequest(
                    f"Cannot create a CDC log for a table {table.qualified_name}, because "
                    "creating nested CDC logs is not allowed"
                )
            check_cdc_supported(table)
        return replace(table, options=merge_options(table.options, options), cdc=cdc)

    def _drop_table(self, stmt: ast.DropTable, current: str | None) -> bool:
        keyspace = self._ks(stmt.name, current)
        name = stmt.name.name
        if self.is_attached_log(keyspace, name):
            raise Unauthorized(f"Cannot DROP cdc log table {name}")
        table = self.table(keyspace, name)
        if table is None:
            if stmt.if_exists:
                return False
            raise InvalidRequest(
                f"Cannot drop non existing table '{name}' in keyspace '{keyspace}'."
            )
        log = self.log_table(table)
        del self._tables[keyspace][name]
        if log is not None:
            del self._tables[keyspace][log.name]
        return True

    def _create_index(self, stmt: ast.CreateIndex, current: str | None) -> bool:
        table = self.existing_table(stmt.table, current)
        names = [i.name for t in self.tables(table.keyspace) for i in t.indexes]
        index = new_index(table, stmt, names)
        if index is None:
            return False
        self._put(replace(table, indexes=(*table.indexes, index)))
        return True

    def _drop_index(self, stmt: ast.DropIndex, current: str | None) -> bool:
        keyspace = self._ks(stmt.name, current)
        for table in self.tables(keyspace):
            kept = tuple(i for i in table.indexes if i.name != stmt.name.name)
            if len(kept) != len(table.indexes):
                self._put(replace(table, indexes=kept))
                return True
        if stmt.if_exists:
            return False
        raise InvalidRequest(
            f"Index '{stmt.name.name}' could not be found in any of the tables of keyspace "
            f"'{keyspace}'"
        )

    def _create_view(self, stmt: ast.CreateMaterializedView, current: str | None) -> bool:
        """Views are refused; first ScyllaDB's own checks (``create_view_statement``), so
        a view on a CDC log gets ScyllaDB's error word for word."""
        keyspace = self._ks(stmt.name, current)
        base_keyspace = stmt.base.keyspace or keyspace
        if base_keyspace != keyspace:
            raise InvalidRequest(
                "Cannot create a materialized view on a table in a separate keyspace "
                f"('{base_keyspace}' != '{keyspace}')"
            )
        base = self.existing_table(ast.QualifiedName(keyspace, stmt.base.name), current)
        if any(c.type.is_counter for c in base.columns):
            raise InvalidRequest("Materialized views are not supported on counter tables")
        if self.is_attached_log(base.keyspace, base.name):
            raise InvalidRequest("Materialized views cannot be created on CDC Log tables")
        raise InvalidRequest(
            "Materialized views are not supported by cqlcdc (a view would have to be "
            "maintained with its base table and log): query the base table, add a secondary "
            "index, or read the CDC log"
        )

    def _alter_view(self, stmt: ast.AlterMaterializedView, current: str | None) -> bool:
        keyspace = self._ks(stmt.name, current)
        raise InvalidRequest(
            f"Materialized view '{stmt.name.name}' not found in keyspace '{keyspace}'"
        )

    def _drop_view(self, stmt: ast.DropMaterializedView, current: str | None) -> bool:
        keyspace = self._ks(stmt.name, current)
        if stmt.if_exists:
            return False  # there are none
        raise InvalidRequest(
            f"Materialized view '{stmt.name.name}' not found in keyspace '{keyspace}'"
        )

    def _truncate(self, stmt: ast.Truncate, current: str | None) -> bool:
        self.existing_table(stmt.name, current)
        return False

    _HANDLERS: dict[type, Callable[[Catalog, Any, str | None], bool]] = {
        ast.CreateKeyspace: _create_keyspace,
        ast.AlterKeyspace: _alter_keyspace,
        ast.DropKeyspace: _drop_keyspace,
        ast.UseKeyspace: _use,
        ast.CreateType: _create_type,
        ast.AlterType: _alter_type,
        ast.DropType: _drop_type,
        ast.CreateTable: _create_table,
        ast.AlterTable: _alter_table,
        ast.DropTable: _drop_table,
        ast.CreateIndex: _create_index,
        ast.DropIndex: _drop_index,
        ast.CreateMaterializedView: _create_view,
        ast.AlterMaterializedView: _alter_view,
        ast.DropMaterializedView: _drop_view,
        ast.Truncate: _truncate,
    }

    # -- persistence -----------------------------------------------------------------------

    def _save(self) -> None:
        if self.data_dir is None:
            return
        document = {
            "keyspaces": [persist.keyspace_to_json(k) for k in self._keyspaces.values()],
            "types": {
                ks: [type_to_json(t) for t in types.values()] for ks, types in self._types.items()
            },
            "tables": self._tables,
            "versions": {
                tid: [persist.table_to_json(t) for t in versions]
                for tid, versions in self._versions.items()
            },
        }
        self.data_dir.write_text(persist.CATALOG_FILE, persist.dump_document(document))

    def copy(self) -> Catalog:
        """A catalog equal to this one that DDL can change without touching this one (the
        coordinator swaps the copy in whole: readers of the old one never see a half-done
        DDL). Schemas are immutable, so only the containers are copied."""
        other = Catalog(None)
        other.data_dir = self.data_dir
        other.admission = self.admission
        other._keyspaces = dict(self._keyspaces)
        other._types = {ks: dict(types) for ks, types in self._types.items()}
        other._tables = {ks: dict(ids) for ks, ids in self._tables.items()}
        other._versions = {tid: list(versions) for tid, versions in self._versions.items()}
        return other

    def reload(self) -> None:
        """Re-read the saved catalog (another process may have run DDL since)."""
        if self.data_dir is not None:
            self._keyspaces, self._types, self._tables, self._versions = {}, {}, {}, {}
            self._load(self.data_dir)

    def _load(self, data_dir: Directory) -> None:
        document = persist.load_document(data_dir)
        if document is None:
            return
        for data in document["keyspaces"]:
            ks = persist.keyspace_from_json(data)
            self._keyspaces[ks.name] = ks
        for ks_name, types in document["types"].items():
            loaded = [type_from_json(t) for t in types]
            self._types[ks_name] = {t.name: t for t in loaded if isinstance(t, UserType)}
        self._tables = {ks: dict(ids) for ks, ids in document["tables"].items()}
        self._versions = {
            tid: [persist.table_from_json(t) for t in versions]
            for tid, versions in document["versions"].items()
        }

    def __iter__(self) -> Iterator[TableSchema]:
        return iter(self.tables())


def _replication(options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Validate and normalise ``replication = {...}`` (short class name first)."""
    values = dict(options)
    strategy = values.pop("class", None)
    if strategy is None:
        raise ConfigurationError("Missing mandatory replication strategy class")
    short = strategy.removeprefix("org.apache.cassandra.locator.")
    if short not in _STRATEGIES:
        raise ConfigurationError(
            f"Unable to find replication strategy class 'org.apache.cassandra.locator.{short}'"
        )
    if short == "SimpleStrategy" and "replication_factor" not in values:
        raise ConfigurationError("SimpleStrategy requires a replication_factor strategy option.")
    for value in values.values():
        if not value.isdigit():
            raise ConfigurationError(
                f"Invalid replication factor: {value}: must be a string holding a numerical value"
            )
    if short == "NetworkTopologyStrategy" and "replication_factor" in values:
        # one simulated datacenter: the shorthand expands to it, as ScyllaDB does
        values = {DATACENTER: values.pop("replication_factor"), **values}
    if short == "NetworkTopologyStrategy":
        # network_topology_strategy.cc validate_options: every option names a known DC
        for dc in values:
            if dc != DATACENTER:
                raise ConfigurationError(
                    f"Unrecognized strategy option {{{dc}}} passed to NetworkTopologyStrategy"
                )
    return (("class", short), *sorted(values.items()))


def _check_field_type(t: CqlType) -> None:
    if t.is_counter:
        raise InvalidRequest("A user type cannot contain counters")
    if isinstance(t, UserType) and t.multicell:
        raise InvalidRequest("A user type cannot contain non-frozen user type fields")


def _check_duplicate_fields(names: tuple[str, ...], type_name: str) -> None:
    for i, name in enumerate(names):
        if name in names[i + 1 :]:
            raise InvalidRequest(f"Duplicate field name {name.encode().hex()} in type {type_name}")


def _option_text(value: object) -> str:
    """A changefeed option value as CQL text (kept raw; the changefeed layer validates it)."""
    if isinstance(value, ast.Constant):
        return "'" + value.text.replace("'", "''") + "'" if value.kind == "string" else value.text
    if isinstance(value, ast.FunctionCall):
        return f"{value.name}({', '.join(_option_text(a) for a in value.args)})"
    if isinstance(value, ast.ColumnRef):
        return value.name
    raise InvalidRequest(f"Invalid changefeed option value: {value}")


def _log_dropped(
    base: TableSchema, log: TableSchema, columns: tuple[Column, ...]
) -> tuple[DroppedColumn, ...]:
    """The log's dropped columns once its columns become ``columns``: those it loses are
    dropped as ScyllaDB drops them (in name order), at their base column's drop if the base
    dropped it, else now (a re-attached log losing what its base lost meanwhile), so a log
    column added again later does not show the values the old one held."""
    kept = {c.name for c in columns}
    gone = sorted((c for c in log.columns if c.name not in kept), key=lambda c: c.name)
    base_drops = {d.name: d.timestamp for d in base.dropped}
    now = time.time_ns() // 1000
    records = [d for d in log.dropped if d.name not in {c.name for c in gone}]
    for c in gone:
        source = c.name.removeprefix("cdc$deleted_elements_").removeprefix("cdc$deleted_")
        records.append(DroppedColumn(c.name, c.type, False, base_drops.get(source, now)))
    return tuple(records)


__all__ = ["SYSTEM_KEYSPACES", "Catalog"]
