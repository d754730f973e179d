"""The CDC log table of a base table (scylla-cdc-reference.md section 1, ``cdc/log.cc``).

>>> from cqlcdc.types import native_type
>>> base = TableSchema("ks", "t", (Column("pk", native_type("int"), "partition_key"),
...                                Column("v", native_type("int"), "regular")))
>>> [c.name for c in log_table_schema(base).select_star_columns]  # doctest: +NORMALIZE_WHITESPACE
['cdc$stream_id', 'cdc$time', 'cdc$batch_seq_no', 'cdc$deleted_v', 'cdc$end_of_batch',
 'cdc$operation', 'cdc$ttl', 'pk', 'v']
"""

from __future__ import annotations

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import LOG_SUFFIX, Column, TableSchema
from cqlcdc.schema.physical import TICKS as TICKS
from cqlcdc.schema.table_options import log_table_options
from cqlcdc.schema.typeshape import deleted_elements_type, log_value_type
from cqlcdc.types import native_type

STREAM_ID = "cdc$stream_id"
TIME = "cdc$time"
BATCH_SEQ_NO = "cdc$batch_seq_no"
OPERATION = "cdc$operation"
TTL = "cdc$ttl"
END_OF_BATCH = "cdc$end_of_batch"
DELETED_PREFIX = "cdc$deleted_"
DELETED_ELEMENTS_PREFIX = "cdc$deleted_elements_"


def log_name(base_name: str) -> str:
    """``t`` -> ``t_scylla_cdc_log``."""
    return base_name + LOG_SUFFIX


def is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIX)


def base_name(log_table_name: str) -> str:
    """``t_scylla_cdc_log`` -> ``t``."""
    return log_table_name.removesuffix(LOG_SUFFIX)


def deleted_column(name: str) -> str:
    """``cdc$deleted_<name>``: True when the delta deleted (or overwrote) the column."""
    return DELETED_PREFIX + name


def deleted_elements_column(name: str) -> str:
    """``cdc$deleted_elements_<name>``: the keys / timeuuids / field indices removed."""
    return DELETED_ELEMENTS_PREFIX + name


def log_columns(base: TableSchema) -> tuple[Column, ...]:
    """The log table's columns, in ``add_columns_to_cdc_log`` order."""
    columns = [
        Column(STREAM_ID, native_type("blob"), "partition_key", 0),
        Column(TIME, native_type("timeuuid"), "clustering", 0),
        Column(BATCH_SEQ_NO, native_type("int"), "clustering", 1),
        Column(OPERATION, native_type("tinyint"), "regular"),
        Column(TTL, native_type("bigint"), "regular"),
        Column(END_OF_BATCH, native_type("boolean"), "regular"),
    ]
    # key columns: same name and type, no cdc$deleted_ column
    columns.extend(Column(c.name, c.type, "regular") for c in base.primary_key)
    for c in base.value_columns:
        # log columns of static columns are regular columns too
        columns.append(Column(c.name, log_value_type(c.type), "regular"))
        columns.append(Column(deleted_column(c.name), native_type("boolean"), "regular"))
        elements = deleted_elements_type(c.type)
        if elements is not None:
            columns.append(Column(deleted_elements_column(c.name), elements, "regular"))
    return tuple(columns)


def log_table_schema(base: TableSchema) -> TableSchema:
    """The ``<t>_scylla_cdc_log`` table for ``base``, with the properties of a new log.

    The catalog gives the result its own ``table_id``/``schema_version`` and keeps the log's
    properties once created (re-attaching a log does not reset them).
    """
    return TableSchema(
        keyspace=base.keyspace,
        name=log_name(base.name),
        columns=log_columns(base),
        options=log_table_options(base.keyspace, base.name, base.cdc.ttl_s),
        log_of=base.name,
        physical_layout=base.physical_layout,
    )


def check_cdc_supported(table: TableSchema) -> None:
    """CDC is not available on counter tables.

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    if any(c.type.is_counter for c in table.value_columns):
        raise InvalidRequest(
            f"Cannot create CDC log for table {table.qualified_name}. "
            "Counter support not implemented"
        )


def log_exists_message(table: TableSchema) -> str:
    """The error when a non-log table already has the log's name."""
    log = log_name(table.name)
    return (
        f"Cannot create CDC log table for table {table.qualified_name} because a table of "
        f"name {table.keyspace}.{log} already exists"
    )


def log_column_change_message(action: object, attached: bool) -> str:
    """Why a user may not change a log table's columns (attached or detached log)."""
    if isinstance(action, ast.RenameColumns):
        if attached:
            return "Cannot rename a column of a CDC log table."
        return (
            "You cannot rename a column of a CDC log table. Although the base table has "
            "deactivated CDC, this table will continue being a CDC log table until it is dropped."
        )
    if attached:
        return (
            "You cannot modify the set of columns of a CDC log table directly. "
            "Modify the base table instead."
        )
    return (
        "You cannot modify the set of columns of a CDC log table directly. Although the base "
        "table has deactivated CDC, this table will continue being a CDC log table until it is "
        "dropped. If you want to modify the columns in it, you can only do that by reenabling "
        "CDC on the base table, which will reattach this log table. Then you will be able to "
        "modify the columns in the base table, and that will have effect on the log table too. "
        "Modifying the columns of a CDC log table directly is never allowed."
    )


__all__ = [
    "BATCH_SEQ_NO",
    "DELETED_ELEMENTS_PREFIX",
    "DELETED_PREFIX",
    "END_OF_BATCH",
    "OPERATION",
    "STREAM_ID",
    "TICKS",
    "TIME",
    "TTL",
    "base_name",
    "check_cdc_supported",
    "deleted_column",
    "deleted_elements_column",
    "is_log_name",
    "log_column_change_message",
    "log_columns",
    "log_exists_message",
    "log_name",
    "log_table_schema",
]
