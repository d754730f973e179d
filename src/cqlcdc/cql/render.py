"""Render an AST back to canonical CQL: upper-case keywords, names quoted only when needed.

``parse(render(x)) == x`` for every statement the parser produces.

>>> from cqlcdc.cql.parser import Parser
>>> render(Parser.parse("update KS.t set v = v + {1:'a'} where pk = 0"))
"UPDATE ks.t SET v = v + {1: 'a'} WHERE pk = 0"
"""

from __future__ import annotations

import re
from typing import assert_never

from cqlcdc.cql.ast import (
    AddChangefeed,
    AddColumns,
    AddTo,
    AlterColumnType,
    AlterKeyspace,
    AlterMaterializedView,
    AlterRole,
    AlterTable,
    AlterTableAction,
    AlterType,
    Assignment,
    Batch,
    BindMarker,
    ColumnDef,
    ColumnRef,
    Condition,
    Constant,
    CreateIndex,
    CreateKeyspace,
    CreateMaterializedView,
    CreateRole,
    CreateTable,
    CreateType,
    Delete,
    DeleteTarget,
    Describe,
    DisableChangefeed,
    DropChangefeed,
    DropColumns,
    DropIndex,
    DropKeyspace,
    DropMaterializedView,
    DropRole,
    DropTable,
    DropType,
    ElementSelection,
    FieldSelection,
    FunctionCall,
    GrantPermissions,
    GrantRole,
    Insert,
    ListLiteral,
    ListPermissions,
    ListRoles,
    MapLiteral,
    OptionValue,
    PermissionName,
    Prepend,
    QualifiedName,
    Relation,
    RemoveFrom,
    RenameColumns,
    Resource,
    RevokePermissions,
    RevokeRole,
    RoleOptions,
    Select,
    Selector,
    SetColumn,
    SetElement,
    SetField,
    SetLiteral,
    SetOptions,
    SetTtlColumn,
    Statement,
    Term,
    Truncate,
    TupleLiteral,
    TypeCast,
    TypeRef,
    UdtLiteral,
    Update,
    UseKeyspace,
    Using,
)
from cqlcdc.cql.tokens import Tokenizer

_PLAIN_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_PLAIN_UPPER_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_RESERVED = Tokenizer.RESERVED_KEYWORDS


def quote_identifier(name: str) -> str:
    """``name`` as CQL text: bare if it reads back unchanged, else double-quoted.

    >>> quote_identifier("cdc$time"), quote_identifier("pk"), quote_identifier("Table")
    ('"cdc$time"', 'pk', '"Table"')
    """
    if _PLAIN_NAME.match(name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_string(text: str) -> str:
    """``text`` as a CQL string literal (``'it''s'``)."""
    return "'" + text.replace("'", "''") + "'"


def render(node: Statement) -> str:
    """Render a statement as canonical CQL text (no trailing ``;``)."""
    match node:
        case CreateKeyspace() | AlterKeyspace() | DropKeyspace() | UseKeyspace():
            return _render_keyspace_statement(node)
        case CreateType() | AlterType() | DropType():
            return _render_type_statement(node)
        case CreateTable():
            return _render_create_table(node)
        case AlterTable():
            return f"ALTER TABLE {render_name(node.name)} {_render_alter_action(node.action)}"
        case DropTable():
            return f"DROP TABLE {_if(node.if_exists, 'IF EXISTS ')}{render_name(node.name)}"
        case CreateIndex():
            return _render_create_index(node)
        case DropIndex():
            return f"DROP INDEX {_if(node.if_exists, 'IF EXISTS ')}{render_name(node.name)}"
        case CreateMaterializedView():
            head = f"CREATE MATERIALIZED VIEW {_if(node.if_not_exists, 'IF NOT EXISTS ')}"
            return f"{head}{render_name(node.name)} AS SELECT ... FROM {render_name(node.base)}"
        case AlterMaterializedView():
            return f"ALTER MATERIALIZED VIEW {render_name(node.name)}"
        case DropMaterializedView():
            head = f"DROP MATERIALIZED VIEW {_if(node.if_exists, 'IF EXISTS ')}"
            return f"{head}{render_name(node.name)}"
        case Truncate():
            return f"TRUNCATE TABLE {render_name(node.name)}"
        case Describe():
            return _render_describe(node)
        case Insert() | Update() | Delete():
            return _render_modification(node)
        case Batch():
            return _render_batch(node)
        case Select():
            return _render_select(node)
        case (
            CreateRole()
            | AlterRole()
            | DropRole()
            | ListRoles()
            | GrantRole()
            | RevokeRole()
            | GrantPermissions()
            | RevokePermissions()
            | ListPermissions()
        ):
            return _render_auth_statement(node)
        case _:
            assert_never(node)


def _render_create_index(node: CreateIndex) -> str:
    targets = []
    for t in node.targets:
        if t.columns:
            targets.append("(" + ", ".join(quote_identifier(c) for c in t.columns) + ")")
        elif t.kind == "regular":
            targets.append(quote_identifier(t.column))
        else:
            targets.append(f"{t.kind.upper()}({quote_identifier(t.column)})")
    head = "CREATE CUSTOM INDEX " if node.custom_class is not None else "CREATE INDEX "
    name = f"{quote_identifier(node.name)} " if node.name is not None else ""
    text = (
        f"{head}{_if(node.if_not_exists, 'IF NOT EXISTS ')}{name}ON {render_name(node.table)} "
        f"({', '.join(targets)})"
    )
    if node.custom_class is not None:
        text += f" USING {quote_string(node.custom_class)}"
    return text


# ---------------------------------------------------------------------------------------------
# Terms and types


def render_term(term: Term | ColumnRef | FieldSelection | ElementSelection) -> str:
    """A term (or a selector's column argument) as CQL text."""
    match term:
        case FieldSelection():
            return ".".join(quote_identifier(n) for n in (term.column, *term.path))
        case ElementSelection():
            return f"{quote_identifier(term.column)}[{render_term(term.key)}]"
        case Constant(kind="string"):
            return quote_string(term.text)
        case Constant():
            return term.text
        case BindMarker(name=None):
            return "?"
        case BindMarker():
            return ":" + quote_identifier(term.name or "")
        case ListLiteral():
            return "[" + _terms(term.items) + "]"
        case SetLiteral():
            return "{" + _terms(term.items) + "}"
        case MapLiteral():
            entries = (f"{render_term(k)}: {render_term(v)}" for k, v in term.entries)
            return "{" + ", ".join(entries) + "}"
        case UdtLiteral():
            fields = (f"{quote_identifier(f)}: {render_term(v)}" for f, v in term.fields)
            return "{" + ", ".join(fields) + "}"
        case TupleLiteral():
            return "(" + _terms(term.items) + ")"
        case FunctionCall():
            name = term.name if term.name == "token" else quote_identifier(term.name)
            return f"{name}({_terms(term.args)})"
        case TypeCast():
            return f"({render_type(term.type)}) {render_term(term.term)}"
        case ColumnRef(name="*"):
            return "*"
        case ColumnRef():
            return quote_identifier(term.name)
        case _:
            assert_never(term)


def _terms(items: tuple[Term | ColumnRef | FieldSelection | ElementSelection, ...]) -> str:
    return ", ".join(render_term(item) for item in items)


def render_type(type_ref: TypeRef) -> str:
    """``int``, ``map<int, text>``, ``frozen<ks.ut>``, ``vector<float, 3>``."""
    if type_ref.size is not None:
        return f"{type_ref.name}<{render_type(type_ref.params[0])}, {type_ref.size}>"
    if type_ref.params:
        return f"{type_ref.name}<{', '.join(render_type(p) for p in type_ref.params)}>"
    return render_name(QualifiedName(type_ref.keyspace, type_ref.name))


def render_name(name: QualifiedName) -> str:
    """``ks.t`` or ``t``, each part quoted if needed."""
    if name.keyspace is None:
        return quote_identifier(name.name)
    return f"{quote_identifier(name.keyspace)}.{quote_identifier(name.name)}"


def _if(flag: bool, text: str) -> str:
    return text if flag else ""


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(quote_identifier(n) for n in names)


def _options(options: tuple[tuple[str, OptionValue], ...]) -> list[str]:
    return [f"{quote_identifier(name)} = {render_term(value)}" for name, value in options]


# ---------------------------------------------------------------------------------------------
# DDL


def _render_keyspace_statement(
    node: CreateKeyspace | AlterKeyspace | DropKeyspace | UseKeyspace,
) -> str:
    match node:
        case UseKeyspace():
            return f"USE {quote_identifier(node.name)}"
        case DropKeyspace():
            return f"DROP KEYSPACE {_if(node.if_exists, 'IF EXISTS ')}{quote_identifier(node.name)}"
        case CreateKeyspace():
            head = f"CREATE KEYSPACE {_if(node.if_not_exists, 'IF NOT EXISTS ')}"
            durable = None if node.durable_writes else False
            with_ = _keyspace_with(node.replication, durable, node.tablets)
            return head + quote_identifier(node.name) + with_
        case AlterKeyspace():
            with_ = _keyspace_with(node.replication, node.durable_writes, node.tablets)
            return f"ALTER KEYSPACE {quote_identifier(node.name)}{with_}"
        case _:
            assert_never(node)


def _keyspace_with(
    replication: tuple[tuple[str, str], ...],
    durable: bool | None,
    tablets: tuple[tuple[str, str], ...] = (),
) -> str:
    properties = []
    if replication:
        pairs = ", ".join(f"{quote_string(k)}: {quote_string(v)}" for k, v in replication)
        properties.append(f"replication = {{{pairs}}}")
    if durable is not None:
        properties.append(f"durable_writes = {'true' if durable else 'false'}")
    if tablets:  # as texts: the catalog reads 'false' as the parser reads false
        pairs = ", ".join(f"{quote_string(k)}: {quote_string(v)}" for k, v in tablets)
        properties.append(f"tablets = {{{pairs}}}")
    return " WITH " + " AND ".join(properties) if properties else ""


def _render_type_statement(node: CreateType | AlterType | DropType) -> str:
    name = render_name(node.name)
    match node:
        case CreateType():
            fields = ", ".join(f"{quote_identifier(f)} {render_type(t)}" for f, t in node.fields)
            return f"CREATE TYPE {_if(node.if_not_exists, 'IF NOT EXISTS ')}{name} ({fields})"
        case AlterType():
            if node.add is not None:
                field, field_type = node.add
                return f"ALTER TYPE {name} ADD {quote_identifier(field)} {render_type(field_type)}"
            return f"ALTER TYPE {name} RENAME {_renames(node.renames)}"
        case DropType():
            return f"DROP TYPE {_if(node.if_exists, 'IF EXISTS ')}{name}"
        case _:
            assert_never(node)


def _renames(renames: tuple[tuple[str, str], ...]) -> str:
    return " AND ".join(f"{quote_identifier(a)} TO {quote_identifier(b)}" for a, b in renames)


def _column_def(column: ColumnDef) -> str:
    ttl = " TTL" if column.ttl else ""
    static = " static" if column.static else ""
    return f"{quote_identifier(column.name)} {render_type(column.type)}{ttl}{static}"


def _render_create_table(node: CreateTable) -> str:
    parts = [_column_def(c) for c in node.columns]
    partition_key = _names(node.partition_key)
    if len(node.partition_key) != 1:
        partition_key = f"({partition_key})"
    key = ", ".join([partition_key, *(quote_identifier(c) for c in node.clustering_key)])
    parts.append(f"PRIMARY KEY ({key})")
    text = (
        f"CREATE TABLE {_if(node.if_not_exists, 'IF NOT EXISTS ')}{render_name(node.name)} "
        f"({', '.join(parts)})"
    )
    properties = []
    if node.compact_storage:
        properties.append("COMPACT STORAGE")
    if node.clustering_order:
        order = ", ".join(f"{quote_identifier(c)} {d}" for c, d in node.clustering_order)
        properties.append(f"CLUSTERING ORDER BY ({order})")
    properties.extend(_options(node.options))
    if properties:
        text += " WITH " + " AND ".join(properties)
    return text


def _changefeed_option(name: str) -> str:
    if _PLAIN_UPPER_NAME.match(name) and name.lower() not in _RESERVED:
        return name
    return quote_identifier(name)


def _render_alter_action(action: AlterTableAction) -> str:
    match action:
        case AddColumns(columns=(column,)):
            return f"ADD {_column_def(column)}"
        case AddColumns():
            return f"ADD ({', '.join(_column_def(c) for c in action.columns)})"
        case DropColumns():
            names = action.columns
            text = (
                f"DROP {quote_identifier(names[0])}"
                if len(names) == 1
                else f"DROP ({_names(names)})"
            )
            using = "" if action.timestamp is None else f" USING TIMESTAMP {action.timestamp}"
            return text + using
        case RenameColumns():
            return f"RENAME {_renames(action.renames)}"
        case AlterColumnType():
            return f"ALTER {quote_identifier(action.column)} TYPE {render_type(action.type)}"
        case SetOptions():
            return "WITH " + " AND ".join(_options(action.options))
        case AddChangefeed():
            options = ", ".join(
                f"{_changefeed_option(name)} = {render_term(value)}"
                for name, value in action.options
            )
            return f"ADD CHANGEFEED {quote_identifier(action.name)} WITH ({options})"
        case DropChangefeed():
            return f"DROP CHANGEFEED {quote_identifier(action.name)}"
        case SetTtlColumn(column=None):
            return "TTL NULL"
        case SetTtlColumn():
            return f"TTL {quote_identifier(action.column or '')}"
        case DisableChangefeed():
            return f"ALTER CHANGEFEED {quote_identifier(action.name)} DISABLE"
        case _:
            assert_never(action)


def _render_describe(node: Describe) -> str:
    internals = " WITH INTERNALS" if node.internals else ""
    if node.name is None:
        return f"DESCRIBE {node.kind}{internals}"
    if node.kind == "KEYSPACE":
        return f"DESCRIBE KEYSPACE {quote_identifier(node.name.name)}{internals}"
    return f"DESCRIBE {node.kind} {render_name(node.name)}{internals}"


# ---------------------------------------------------------------------------------------------
# DML and SELECT


def _render_using(using: Using) -> str:
    parts = []
    if using.timestamp is not None:
        parts.append(f"TIMESTAMP {render_term(using.timestamp)}")
    if using.ttl is not None:
        parts.append(f"TTL {render_term(using.ttl)}")
    if using.timeout is not None:
        parts.append(f"TIMEOUT {render_term(using.timeout)}")
    return " USING " + " AND ".join(parts) if parts else ""


def _render_assignment(assignment: Assignment) -> str:
    column = quote_identifier(assignment.column)
    match assignment:
        case SetColumn():
            return f"{column} = {render_term(assignment.value)}"
        case AddTo():
            return f"{column} = {column} + {render_term(assignment.value)}"
        case RemoveFrom():
            return f"{column} = {column} - {render_term(assignment.value)}"
        case Prepend():
            return f"{column} = {render_term(assignment.value)} + {column}"
        case SetElement():
            key, value = render_term(assignment.key), render_term(assignment.value)
            return f"{column}[{key}] = {value}"
        case SetField():
            field = quote_identifier(assignment.field)
            return f"{column}.{field} = {render_term(assignment.value)}"
        case _:
            assert_never(assignment)


def render_relation(relation: Relation) -> str:
    columns = _names(relation.columns)
    if relation.token:
        left = f"token({columns})"
    elif relation.multi:
        left = f"({columns})"
    elif relation.key is not None:
        left = f"{columns}[{render_term(relation.key)}]"
    else:
        left = columns
    return f"{left} {relation.operator} {render_term(relation.value)}"


def _render_where(where: tuple[Relation, ...]) -> str:
    return " WHERE " + " AND ".join(render_relation(r) for r in where) if where else ""


def _render_condition(condition: Condition) -> str:
    left = quote_identifier(condition.column)
    if condition.key is not None:
        left += f"[{render_term(condition.key)}]"
    elif condition.field is not None:
        left += f".{quote_identifier(condition.field)}"
    return f"{left} {condition.operator} {render_term(condition.value)}"


def _render_conditions(if_exists: bool, conditions: tuple[Condition, ...]) -> str:
    if if_exists:
        return " IF EXISTS"
    if conditions:
        return " IF " + " AND ".join(_render_condition(c) for c in conditions)
    return ""


def _render_delete_target(target: DeleteTarget) -> str:
    column = quote_identifier(target.column)
    if target.key is not None:
        return f"{column}[{render_term(target.key)}]"
    if target.field is not None:
        return f"{column}.{quote_identifier(target.field)}"
    return column


def _render_modification(node: Insert | Update | Delete) -> str:
    table = render_name(node.table)
    match node:
        case Insert():
            if node.json is not None:
                text = f"INSERT INTO {table} JSON {render_term(node.json)}"
                if node.json_default_unset:
                    text += " DEFAULT UNSET"
            else:
                values = _terms(node.values)
                text = f"INSERT INTO {table} ({_names(node.columns)}) VALUES ({values})"
            return text + _if(node.if_not_exists, " IF NOT EXISTS") + _render_using(node.using)
        case Update():
            assignments = ", ".join(_render_assignment(a) for a in node.assignments)
            return (
                f"UPDATE {table}{_render_using(node.using)} SET {assignments}"
                f"{_render_where(node.where)}{_render_conditions(node.if_exists, node.conditions)}"
            )
        case Delete():
            targets = ", ".join(_render_delete_target(t) for t in node.targets)
            return (
                f"DELETE {targets + ' ' if targets else ''}FROM {table}{_render_using(node.using)}"
                f"{_render_where(node.where)}{_render_conditions(node.if_exists, node.conditions)}"
            )
        case _:
            assert_never(node)


def _render_batch(node: Batch) -> str:
    kind = "" if node.kind == "LOGGED" else f"{node.kind} "
    statements = "".join(f" {_render_modification(s)};" for s in node.statements)
    return f"BEGIN {kind}BATCH{_render_using(node.using)}{statements} APPLY BATCH"


def _render_selector(selector: Selector) -> str:
    text = render_term(selector.expr)
    if selector.alias is not None:
        text += f" AS {quote_identifier(selector.alias)}"
    return text


def _render_select(node: Select) -> str:
    parts = ["SELECT"]
    if node.json:
        parts.append("JSON")
    if node.distinct:
        parts.append("DISTINCT")
    parts.append(", ".join(_render_selector(s) for s in node.selectors) or "*")
    parts.append(f"FROM {render_name(node.table)}{_render_where(node.where)}")
    if node.group_by:
        parts.append("GROUP BY " + ", ".join(quote_identifier(c) for c in node.group_by))
    if node.order_by:
        order = ", ".join(
            quote_identifier(o.column) + (" DESC" if o.descending else "") for o in node.order_by
        )
        parts.append(f"ORDER BY {order}")
    if node.per_partition_limit is not None:
        parts.append(f"PER PARTITION LIMIT {render_term(node.per_partition_limit)}")
    if node.limit is not None:
        parts.append(f"LIMIT {render_term(node.limit)}")
    if node.allow_filtering:
        parts.append("ALLOW FILTERING")
    if node.bypass_cache:
        parts.append("BYPASS CACHE")
    return " ".join(parts) + _render_using(node.using)


# ---------------------------------------------------------------------------------------------
# Roles and permissions


def render_role_name(name: str) -> str:
    """A role (or user) name: bare if it reads back unchanged, else a string literal (which
    keeps its case, and reads back as a user name too)."""
    if _PLAIN_NAME.match(name) and name not in _RESERVED:
        return name
    return quote_string(name)


def _render_role_options(options: RoleOptions) -> str:
    parts: list[str] = []
    if options.password is not None:
        parts.append(f"PASSWORD = {quote_string(options.password)}")
    if options.login is not None:
        parts.append(f"LOGIN = {str(options.login).lower()}")
    if options.superuser is not None:
        parts.append(f"SUPERUSER = {str(options.superuser).lower()}")
    if options.options is not None:
        entries = ", ".join(f"{quote_string(k)}: {quote_string(v)}" for k, v in options.options)
        parts.append(f"OPTIONS = {{{entries}}}")
    return f" WITH {' AND '.join(parts)}" if parts else ""


def _render_user_options(options: RoleOptions) -> str:
    password = (
        "" if options.password is None else f" WITH PASSWORD {quote_string(options.password)}"
    )
    if options.superuser is None:
        return password
    return f"{password} {'SUPERUSER' if options.superuser else 'NOSUPERUSER'}"


def render_resource(resource: Resource) -> str:
    """``ALL KEYSPACES``, ``KEYSPACE ks``, ``TABLE ks.t``, ``ALL ROLES``, ``ROLE r``."""
    match resource.kind:
        case "ALL KEYSPACES" | "ALL ROLES":
            return resource.kind
        case "KEYSPACE":
            return f"KEYSPACE {quote_identifier(resource.name or '')}"
        case "TABLE":
            return f"TABLE {render_name(QualifiedName(resource.keyspace, resource.name or ''))}"
        case "ROLE":
            return f"ROLE {render_role_name(resource.name or '')}"
        case _:
            assert_never(resource.kind)


def _render_permissions(permissions: tuple[PermissionName, ...] | None) -> str:
    return "ALL PERMISSIONS" if permissions is None else ", ".join(permissions)


def _render_auth_statement(
    node: CreateRole
    | AlterRole
    | DropRole
    | ListRoles
    | GrantRole
    | RevokeRole
    | GrantPermissions
    | RevokePermissions
    | ListPermissions,
) -> str:
    match node:
        case CreateRole(user=True):
            head = f"CREATE USER {_if(node.if_not_exists, 'IF NOT EXISTS ')}"
            return head + render_role_name(node.name) + _render_user_options(node.options)
        case CreateRole():
            head = f"CREATE ROLE {_if(node.if_not_exists, 'IF NOT EXISTS ')}"
            return head + render_role_name(node.name) + _render_role_options(node.options)
        case AlterRole(user=True):
            return f"ALTER USER {render_role_name(node.name)}{_render_user_options(node.options)}"
        case AlterRole():
            return f"ALTER ROLE {render_role_name(node.name)}{_render_role_options(node.options)}"
        case DropRole():
            kind = "USER" if node.user else "ROLE"
            return f"DROP {kind} {_if(node.if_exists, 'IF EXISTS ')}{render_role_name(node.name)}"
        case ListRoles(users=True):
            return "LIST USERS"
        case ListRoles():
            of = "" if node.of is None else f" OF {render_role_name(node.of)}"
            return f"LIST ROLES{of}{_if(not node.recursive, ' NORECURSIVE')}"
        case GrantRole():
            return f"GRANT {render_role_name(node.role)} TO {render_role_name(node.grantee)}"
        case RevokeRole():
            return f"REVOKE {render_role_name(node.role)} FROM {render_role_name(node.revokee)}"
        case GrantPermissions():
            return (
                f"GRANT {_render_permissions(node.permissions)} ON "
                f"{render_resource(node.resource)} TO {render_role_name(node.grantee)}"
            )
        case RevokePermissions():
            return (
                f"REVOKE {_render_permissions(node.permissions)} ON "
                f"{render_resource(node.resource)} FROM {render_role_name(node.revokee)}"
            )
        case ListPermissions():
            on = "" if node.resource is None else f" ON {render_resource(node.resource)}"
            of = "" if node.of is None else f" OF {render_role_name(node.of)}"
            norecursive = _if(not node.recursive, " NORECURSIVE")
            return f"LIST {_render_permissions(node.permissions)}{on}{of}{norecursive}"
        case _:
            assert_never(node)
