"""The CQL abstract syntax tree: frozen, slotted dataclasses named for what they are.

Identifiers are already normalised by the parser: unquoted names are lower-cased, quoted
names keep their case (``"cdc$time"`` -> ``cdc$time``). Literals stay untyped (``Constant``
with its token kind and text) until a column's type interprets them (``cqlcdc.types``).

>>> Constant(kind="integer", text="42")
Constant(kind='integer', text='42')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

# ---------------------------------------------------------------------------------------------
# Terms (values written in statements)

ConstantKind = Literal[
    "string",  # 'text' or $$text$$ (text holds the unescaped value)
    "integer",  # 42, -7 (text holds the digits with sign)
    "float",  # 1.5, -2e10, NaN, Infinity, -Infinity
    "boolean",  # true / false (text lower-cased)
    "uuid",  # 123e4567-e89b-12d3-a456-426614174000 (text lower-cased)
    "hex",  # 0xCAFE (text lower-cased, with 0x)
    "duration",  # 1h30m, P1D, PT2H (text as written)
    "null",  # null (text 'null')
]


@dataclass(frozen=True, slots=True)
class Constant:
    """A literal token: its kind and its text (strings unescaped, the rest as written)."""

    kind: ConstantKind
    text: str


@dataclass(frozen=True, slots=True)
class BindMarker:
    """``?`` (name None) or ``:name``: a value bound at execution (prepared statements)."""

    name: str | None = None
    index: int = 0


@dataclass(frozen=True, slots=True)
class ListLiteral:
    """``[a, b, ...]``."""

    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class SetLiteral:
    """``{a, b, ...}`` with at least one element (``{}`` parses as an empty MapLiteral)."""

    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class MapLiteral:
    """``{k: v, ...}``; also the empty ``{}``, which a set or map column may accept."""

    entries: tuple[tuple[Term, Term], ...]


@dataclass(frozen=True, slots=True)
class UdtLiteral:
    """``{field: value, ...}`` where every key is an identifier (normalised like a column)."""

    fields: tuple[tuple[str, Term], ...]


@dataclass(frozen=True, slots=True)
class TupleLiteral:
    """``(a, b, ...)`` with two or more items, or a parenthesised value list in ``IN (...)``."""

    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """``name(args)``: now(), uuid(), currenttimestamp(), SCYLLA_TIMEUUID_LIST_INDEX(u), ...

    ``name`` is lower-cased unless quoted. ``args`` are Terms, except in a SELECT selector,
    where an argument may also name a column (``writetime(v)``: ``ColumnRef('v')``;
    ``count(*)``: ``ColumnRef('*')``) or a field or element of one (``writetime(u.f)``,
    ``ttl(m[k])``).
    """

    name: str
    args: tuple[Term | ColumnArg, ...]


@dataclass(frozen=True, slots=True)
class TypeCast:
    """``(type) term``."""

    type: TypeRef
    term: Term


Term: TypeAlias = (
    Constant
    | BindMarker
    | ListLiteral
    | SetLiteral
    | MapLiteral
    | UdtLiteral
    | TupleLiteral
    | FunctionCall
    | TypeCast
)

# ---------------------------------------------------------------------------------------------
# Types as written in DDL


@dataclass(frozen=True, slots=True)
class TypeRef:
    """A type as written: ``int``, ``map<int, text>``, ``frozen<ks.ut>``, ``tuple<int, text>``.

    ``name`` is lower-cased for native and parameterised types (``int``, ``varchar``,
    ``list``, ``set``, ``map``, ``tuple``, ``frozen``, ``vector``); for a user-defined type it
    is the UDT name (normalised like an identifier) and ``keyspace`` may name its keyspace.
    ``params`` holds the type parameters; ``vector<float, 3>`` keeps the dimension in
    ``size``.
    """

    name: str
    params: tuple[TypeRef, ...] = ()
    keyspace: str | None = None
    size: int | None = None


# ---------------------------------------------------------------------------------------------
# Shared statement parts


@dataclass(frozen=True, slots=True)
class QualifiedName:
    """``ks.name`` or ``name`` (keyspace None: the session's current keyspace)."""

    keyspace: str | None
    name: str


@dataclass(frozen=True, slots=True)
class Using:
    """``USING TIMESTAMP t AND TTL s AND TIMEOUT d`` (any may be absent; ``TIMEOUT`` is
    ScyllaDB's extension)."""

    timestamp: Term | None = None
    ttl: Term | None = None
    timeout: Term | None = None


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """A column in a WHERE clause or selector."""

    name: str


RelationOperator = Literal[
    "=", "<", "<=", ">", ">=", "!=", "IN", "NOT IN", "CONTAINS", "CONTAINS KEY", "LIKE", "IS NOT"
]


@dataclass(frozen=True, slots=True)
class Relation:
    """One WHERE condition.

    Single column: ``ck >= 3`` -> ``Relation(("ck",), ">=", Constant(...))``.
    Multi-column: ``(ck1, ck2) > (1, 2)`` -> ``Relation(("ck1", "ck2"), ">", TupleLiteral(...))``.
    ``IN``: ``value`` is a TupleLiteral of the listed terms (or a BindMarker).
    ``token(pk) > 5``: ``token`` is True and ``columns`` are the token's arguments.
    ``m['k'] = 1`` (map element): ``key`` holds the element key.
    ``multi`` is True for the parenthesised form, even of one column: ``(ck) = (1)`` compares
    a one-element tuple, as ScyllaDB's multi-column relations do.
    """

    columns: tuple[str, ...]
    operator: RelationOperator
    value: Term
    token: bool = False
    key: Term | None = None
    multi: bool = False


@dataclass(frozen=True, slots=True)
class Condition:
    """An LWT condition ``IF col = value`` (``key``/``field`` for ``m[k]`` / ``u.f``)."""

    column: str
    operator: RelationOperator
    value: Term
    key: Term | None = None
    field: str | None = None


# ---------------------------------------------------------------------------------------------
# UPDATE assignments (one class per SET form of the spec)


@dataclass(frozen=True, slots=True)
class SetColumn:
    """``x = v`` (also ``x = null``, ``x = {}``)."""

    column: str
    value: Term


@dataclass(frozen=True, slots=True)
class AddTo:
    """``x = x + v`` (collection append / union; counter increment ``c = c + 1``)."""

    column: str
    value: Term


@dataclass(frozen=True, slots=True)
class Prepend:
    """``l = [...] + l``."""

    column: str
    value: Term


@dataclass(frozen=True, slots=True)
class RemoveFrom:
    """``x = x - v`` (map keys / set elements / list values; counter decrement)."""

    column: str
    value: Term


@dataclass(frozen=True, slots=True)
class SetElement:
    """``m[k] = v``, ``l[i] = v``, ``l[SCYLLA_TIMEUUID_LIST_INDEX(u)] = v``.

    ``key`` is the subscript term; for the timeuuid form it is a FunctionCall named
    ``scylla_timeuuid_list_index``.
    """

    column: str
    key: Term
    value: Term


@dataclass(frozen=True, slots=True)
class SetField:
    """``u.f = v`` on a non-frozen UDT column."""

    column: str
    field: str
    value: Term


Assignment: TypeAlias = SetColumn | AddTo | Prepend | RemoveFrom | SetElement | SetField


@dataclass(frozen=True, slots=True)
class DeleteTarget:
    """What a DELETE names: ``x``, ``m[k]``, ``l[i]`` or ``u.f``."""

    column: str
    key: Term | None = None
    field: str | None = None


# ---------------------------------------------------------------------------------------------
# DDL


@dataclass(frozen=True, slots=True)
class CreateKeyspace:
    name: str
    replication: tuple[tuple[str, str], ...] = ()
    durable_writes: bool = True
    if_not_exists: bool = False
    tablets: tuple[tuple[str, str], ...] = ()  # ScyllaDB 6's tablets = {...}, as texts


@dataclass(frozen=True, slots=True)
class AlterKeyspace:
    name: str
    replication: tuple[tuple[str, str], ...] = ()
    durable_writes: bool | None = None
    tablets: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DropKeyspace:
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class UseKeyspace:
    name: str


@dataclass(frozen=True, slots=True)
class CreateType:
    name: QualifiedName
    fields: tuple[tuple[str, TypeRef], ...]
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterType:
    """``ALTER TYPE t ADD f type`` (``add``) or ``ALTER TYPE t RENAME a TO b AND ...``."""

    name: QualifiedName
    add: tuple[str, TypeRef] | None = None
    renames: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DropType:
    name: QualifiedName
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ColumnDef:
    name: str
    type: TypeRef
    static: bool = False
    ttl: bool = False  # ScyllaDB's per-row TTL column: ``e timestamp TTL``


# An option value: a constant, a map literal (``cdc = {...}``), or for YDB-style changefeed
# options an ``Interval('PT1S')`` FunctionCall.
OptionValue: TypeAlias = Term


@dataclass(frozen=True, slots=True)
class CreateTable:
    """CREATE TABLE. ``options`` keeps every ``WITH`` option in order (name lower-cased).

    ``partition_key``/``clustering_key`` come from ``PRIMARY KEY`` (inline or separate);
    ``clustering_order`` from ``CLUSTERING ORDER BY`` (ASC/DESC upper-cased).
    """

    name: QualifiedName
    columns: tuple[ColumnDef, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...] = ()
    clustering_order: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, OptionValue], ...] = ()
    compact_storage: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AddColumns:
    columns: tuple[ColumnDef, ...]


@dataclass(frozen=True, slots=True)
class DropColumns:
    columns: tuple[str, ...]
    timestamp: int | None = None  # USING TIMESTAMP (None: the coordinator's clock)


@dataclass(frozen=True, slots=True)
class RenameColumns:
    renames: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AlterColumnType:
    column: str
    type: TypeRef


@dataclass(frozen=True, slots=True)
class SetOptions:
    options: tuple[tuple[str, OptionValue], ...]


@dataclass(frozen=True, slots=True)
class AddChangefeed:
    """``ADD CHANGEFEED name WITH (MODE = '...', FORMAT = '...', ...)`` (option names upper)."""

    name: str
    options: tuple[tuple[str, OptionValue], ...]


@dataclass(frozen=True, slots=True)
class DropChangefeed:
    name: str


@dataclass(frozen=True, slots=True)
class SetTtlColumn:
    """``ALTER TABLE t TTL col`` (ScyllaDB's per-row TTL); ``TTL NULL``: column None."""

    column: str | None


@dataclass(frozen=True, slots=True)
class DisableChangefeed:
    """``ALTER CHANGEFEED name DISABLE`` (YQL): the feed stops taking records; its topic stays
    readable until the feed is dropped. YDB has no way back (no ENABLE)."""

    name: str


AlterTableAction: TypeAlias = (
    AddColumns
    | DropColumns
    | RenameColumns
    | AlterColumnType
    | SetOptions
    | AddChangefeed
    | DropChangefeed
    | SetTtlColumn
    | DisableChangefeed
)


@dataclass(frozen=True, slots=True)
class AlterTable:
    name: QualifiedName
    action: AlterTableAction


@dataclass(frozen=True, slots=True)
class DropTable:
    name: QualifiedName
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class IndexTarget:
    """One target of CREATE INDEX: ``column``, ``keys(c)``/``values(c)``/``entries(c)``/
    ``full(c)`` (``kind``), or a local index's partition key ``(pk1, pk2)`` (``columns``)."""

    column: str = ""
    kind: Literal["regular", "values", "keys", "entries", "full"] = "regular"
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateIndex:
    """``CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON t (targets) [USING 'class']``."""

    table: QualifiedName
    targets: tuple[IndexTarget, ...]
    name: str | None = None
    if_not_exists: bool = False
    custom_class: str | None = None


@dataclass(frozen=True, slots=True)
class CreateMaterializedView:
    """``CREATE MATERIALIZED VIEW [IF NOT EXISTS] v AS SELECT ... FROM base WHERE ...
    PRIMARY KEY (...) [WITH ...]``: only the names are kept (views are refused; the base
    decides which error, ``Catalog._create_view``)."""

    name: QualifiedName
    base: QualifiedName
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterMaterializedView:
    """``ALTER MATERIALIZED VIEW v WITH ...``."""

    name: QualifiedName


@dataclass(frozen=True, slots=True)
class DropMaterializedView:
    """``DROP MATERIALIZED VIEW [IF EXISTS] v``."""

    name: QualifiedName
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropIndex:
    """``DROP INDEX [IF EXISTS] [ks.]name``."""

    name: QualifiedName
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Truncate:
    name: QualifiedName


DescribeKind = Literal[
    "TABLE",
    "TYPE",
    "KEYSPACE",
    "INDEX",
    "TABLES",
    "TYPES",
    "KEYSPACES",
    "SCHEMA",
    "CLUSTER",
    "FUNCTIONS",
    "AGGREGATES",
]


@dataclass(frozen=True, slots=True)
class Describe:
    """DESCRIBE / DESC. ``name`` is None for the plural forms and SCHEMA/CLUSTER.

    For KEYSPACE, ``name.name`` is the keyspace and ``name.keyspace`` is None.
    """

    kind: DescribeKind
    name: QualifiedName | None = None
    internals: bool = False  # WITH INTERNALS: table ids and dropped columns too


# ---------------------------------------------------------------------------------------------
# DML


@dataclass(frozen=True, slots=True)
class Insert:
    table: QualifiedName
    columns: tuple[str, ...]
    values: tuple[Term, ...]
    using: Using = Using()
    if_not_exists: bool = False
    json: Term | None = None  # INSERT ... JSON '...': columns/values empty, this holds the text
    json_default_unset: bool = False  # INSERT ... JSON ... DEFAULT UNSET


@dataclass(frozen=True, slots=True)
class Update:
    table: QualifiedName
    assignments: tuple[Assignment, ...]
    where: tuple[Relation, ...]
    using: Using = Using()
    if_exists: bool = False
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class Delete:
    """DELETE. ``targets`` empty means a row, range or partition delete (by the WHERE)."""

    table: QualifiedName
    targets: tuple[DeleteTarget, ...]
    where: tuple[Relation, ...]
    using: Using = Using()
    if_exists: bool = False
    conditions: tuple[Condition, ...] = ()


ModificationStatement: TypeAlias = Insert | Update | Delete


@dataclass(frozen=True, slots=True)
class Batch:
    """BEGIN [UNLOGGED | COUNTER] BATCH [USING TIMESTAMP t] ... APPLY BATCH."""

    kind: Literal["LOGGED", "UNLOGGED", "COUNTER"]
    statements: tuple[ModificationStatement, ...]
    using: Using = Using()


@dataclass(frozen=True, slots=True)
class Selector:
    """One item of a SELECT list: a column, or a function of columns, with an optional alias.

    ``expr`` is a ColumnRef (``pk``, ``"cdc$time"``), a FunctionCall whose args are
    ColumnRefs or Terms (``writetime(v)``, ``ttl(v)``, ``token(pk)``, ``count(*)`` with a
    ``ColumnRef('*')`` argument), or a field or element of a column (``u.f``, ``m[k]``).
    """

    expr: ColumnRef | FunctionCall | FieldSelection | ElementSelection
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class FieldSelection:
    """``u.f`` in a SELECT list: one field of a UDT column; ``more`` names the fields of
    nested UDTs below it (``b.x.a``: column ``b``, field ``x``, more ``('a',)``)."""

    column: str
    field: str
    more: tuple[str, ...] = ()

    @property
    def path(self) -> tuple[str, ...]:
        """The field names from the column down."""
        return (self.field, *self.more)


@dataclass(frozen=True, slots=True)
class ElementSelection:
    """``m[k]`` / ``l[i]`` / ``s[e]`` in a SELECT list: one element of a collection column."""

    column: str
    key: Term


# a selector argument that reads a column: the column, a field of it, an element of it
ColumnArg: TypeAlias = ColumnRef | FieldSelection | ElementSelection


@dataclass(frozen=True, slots=True)
class Ordering:
    column: str
    descending: bool = False


@dataclass(frozen=True, slots=True)
class Select:
    """SELECT. ``selectors`` empty means ``*``; ``group_by`` names the GROUP BY columns;
    ``using`` holds ScyllaDB's ``USING TIMEOUT`` (no timestamp or TTL)."""

    table: QualifiedName
    selectors: tuple[Selector, ...]
    where: tuple[Relation, ...] = ()
    order_by: tuple[Ordering, ...] = ()
    limit: Term | None = None
    per_partition_limit: Term | None = None
    allow_filtering: bool = False
    distinct: bool = False
    json: bool = False
    group_by: tuple[str, ...] = ()
    bypass_cache: bool = False
    using: Using = Using()


# ---------------------------------------------------------------------------------------------
# Roles and permissions (Cassandra 4's DCL; role names are normalised like identifiers, a quoted
# name or a string literal keeps its case)

PermissionName = Literal[
    "CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "DESCRIBE", "EXECUTE"
]
ResourceKind = Literal["ALL KEYSPACES", "KEYSPACE", "TABLE", "ALL ROLES", "ROLE"]


@dataclass(frozen=True, slots=True)
class RoleOptions:
    """``WITH PASSWORD = '...' AND LOGIN = b AND SUPERUSER = b AND OPTIONS = {...}``: None is
    an option not given. The password never shows in a repr."""

    password: str | None = field(default=None, repr=False)
    login: bool | None = None
    superuser: bool | None = None
    options: tuple[tuple[str, str], ...] | None = None

    @property
    def empty(self) -> bool:
        return (
            self.password is None
            and self.login is None
            and self.superuser is None
            and self.options is None
        )


@dataclass(frozen=True, slots=True)
class CreateRole:
    """``CREATE ROLE`` (``user``: the legacy ``CREATE USER``, which gives LOGIN)."""

    name: str
    options: RoleOptions = RoleOptions()
    if_not_exists: bool = False
    user: bool = False


@dataclass(frozen=True, slots=True)
class AlterRole:
    """``ALTER ROLE r WITH ...`` (``user``: ``ALTER USER``)."""

    name: str
    options: RoleOptions = RoleOptions()
    user: bool = False


@dataclass(frozen=True, slots=True)
class DropRole:
    """``DROP ROLE`` (``user``: ``DROP USER``)."""

    name: str
    if_exists: bool = False
    user: bool = False


@dataclass(frozen=True, slots=True)
class ListRoles:
    """``LIST ROLES [OF r] [NORECURSIVE]``; ``users``: ``LIST USERS``."""

    of: str | None = None
    recursive: bool = True
    users: bool = False


@dataclass(frozen=True, slots=True)
class GrantRole:
    """``GRANT role TO grantee``: ``grantee`` becomes a member of ``role``."""

    role: str
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokeRole:
    """``REVOKE role FROM revokee``."""

    role: str
    revokee: str


@dataclass(frozen=True, slots=True)
class Resource:
    """What permissions are granted on: ``ALL KEYSPACES``, ``KEYSPACE ks``, ``[TABLE] ks.t``
    (``keyspace`` None: the session's), ``ALL ROLES``, ``ROLE r`` (``name`` holds the
    keyspace, the table or the role)."""

    kind: ResourceKind
    keyspace: str | None = None
    name: str | None = None


# The permissions each kind of resource supports, in Cassandra's order (``Permission`` enum
# ordinals): GRANT ALL gives these, and GRANT of none of them is an error.
APPLICABLE_PERMISSIONS: dict[ResourceKind, tuple[PermissionName, ...]] = {
    "ALL KEYSPACES": ("CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"),
    "KEYSPACE": ("CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"),
    "TABLE": ("ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"),
    "ALL ROLES": ("CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"),
    "ROLE": ("ALTER", "DROP", "AUTHORIZE"),
}
PERMISSION_ORDER: tuple[PermissionName, ...] = (
    "CREATE",
    "ALTER",
    "DROP",
    "SELECT",
    "MODIFY",
    "AUTHORIZE",
    "DESCRIBE",
    "EXECUTE",
)


@dataclass(frozen=True, slots=True)
class GrantPermissions:
    """``GRANT perm[, perm] | ALL [PERMISSIONS] ON resource TO role``: ``permissions`` None
    is ALL; listed ones are those the resource supports (as Cassandra filters them)."""

    permissions: tuple[PermissionName, ...] | None
    resource: Resource
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokePermissions:
    """``REVOKE perm[, perm] | ALL [PERMISSIONS] ON resource FROM role``."""

    permissions: tuple[PermissionName, ...] | None
    resource: Resource
    revokee: str


@dataclass(frozen=True, slots=True)
class ListPermissions:
    """``LIST perm[, perm] | ALL [PERMISSIONS] [ON resource] [OF role] [NORECURSIVE]``."""

    permissions: tuple[PermissionName, ...] | None
    resource: Resource | None = None
    of: str | None = None
    recursive: bool = True


AuthStatement: TypeAlias = (
    CreateRole
    | AlterRole
    | DropRole
    | ListRoles
    | GrantRole
    | RevokeRole
    | GrantPermissions
    | RevokePermissions
    | ListPermissions
)


Statement: TypeAlias = (
    CreateKeyspace
    | AlterKeyspace
    | DropKeyspace
    | UseKeyspace
    | CreateType
    | AlterType
    | DropType
    | CreateTable
    | AlterTable
    | DropTable
    | CreateIndex
    | DropIndex
    | CreateMaterializedView
    | AlterMaterializedView
    | DropMaterializedView
    | Truncate
    | Describe
    | Insert
    | Update
    | Delete
    | Batch
    | Select
    | AuthStatement
)
