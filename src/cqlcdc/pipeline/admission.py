"""Schema admission: every output of a table can hold it, checked when its DDL runs.

A table's rows go to its base rows, its CDC log (when CDC is on), its feeds (records as
text, whatever the schema) and the Spark sources. A schema one of them cannot hold would be
found by a micro-batch, after writes were acknowledged, and stop the table. So the catalog
asks :func:`admit` for every new table version (CREATE TABLE, ALTER TABLE, ALTER TYPE, cdc
options, ADD CHANGEFEED) and the DDL is refused with what cannot be held. Tables of physical
layout 2 always pass (``schema.physical``); this is the safety net for everything else,
above all tables of layout 1, whose files name columns as the user wrote them.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import Schema as DeltaSchema

from cqlcdc.cdc.outputs import log_arrow_schema
from cqlcdc.errors import InvalidRequest
from cqlcdc.pipeline.table_scan import spark_type
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import case_collisions, cql_name
from cqlcdc.storage.base_rows import base_schema


def admit(table: TableSchema) -> None:
    """Check that every output of ``table`` can hold it.

    Raises:
        InvalidRequest: an output cannot; the message names the table, the output, the
            column and why.
    """
    if table.log_of is not None:
        return  # a log table's rows are its base table's log output, checked with the base
    outputs = [("base table", base_schema(table))]
    if table.cdc.enabled:
        log = log_table_schema(table)
        names = [c.name for c in log.columns]
        for name in {n for n in names if names.count(n) > 1}:
            raise InvalidRequest(
                f"Cannot create CDC log for table {table.qualified_name}: its column {name} "
                "has the name of a CDC log column"
            )
        outputs.append(("CDC log", log_arrow_schema(log)))
        _check_spark(table, log)
    _check_spark(table, table)
    for output, schema in outputs:
        _check_files(table, output, schema)


def _check_files(table: TableSchema, output: str, schema: pa.Schema) -> None:
    collisions = case_collisions(schema)
    if collisions:
        first, second = collisions[0]
        raise InvalidRequest(
            f"Cannot store table {table.qualified_name}: its {output} files would hold the "
            f"columns {_shown(first)} and {_shown(second)}, which Delta Lake takes to be one "
            "name (it compares names without case). The table was made before cqlcdc named "
            "columns physically; give one of them another name"
        )
    try:
        DeltaSchema.from_arrow(schema)
    except Exception as err:  # delta-rs raises its own classes: the reason is the text
        reason = str(err).splitlines()[0]
        raise InvalidRequest(
            f"Cannot store table {table.qualified_name}: Delta Lake cannot hold its {output} "
            f"files' schema ({reason})"
        ) from err


def _check_spark(table: TableSchema, schema: TableSchema) -> None:
    for column in schema.select_star_columns:
        try:
            spark_type(column.type.arrow_type())
        except Exception as err:
            raise InvalidRequest(
                f"Cannot store table {table.qualified_name}: the column {column.name} of "
                f"{schema.name} ({column.type.cql_name}) has no Spark type: {err}"
            ) from err


def _shown(physical: str) -> str:
    """A physical name as the CQL name it stands for (``k$``/``v$`` columns by their column)."""
    for prefix in ("k$", "v$"):
        if physical.startswith(prefix):
            return _shown(
                physical[len(prefix) :].rsplit("$", 1)[0] if prefix == "v$" else physical[2:]
            )
    return cql_name(physical)


__all__ = ["admit"]
