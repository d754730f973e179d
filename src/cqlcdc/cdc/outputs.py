"""The names and Arrow schemas of the core's outputs, and the log rows as Arrow.

Most readers of the core's outputs (reads, the pipeline's sources, the coordinator waiting
for outcomes and errors) need only these: which output holds a table's base fragments or log
rows, and its columns. Kept apart from the processor so that naming an output does not pull
in the row path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.schema.log_table import TIME
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import LOG_INTERNAL, TICKS, column_name, conform, value_type
from cqlcdc.storage.vectorized import timeuuid_ticks
from cqlcdc.types.arrow import NullColumns, none_array
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import EMPTY

# the outcome of each conditional write (read back by the writer waiting for it): whether it
# applied, and per statement the old row's result columns, each value in its CQL encoding
OUTCOMES_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("applied", pa.bool_(), nullable=False),
        pa.field("rows", pa.list_(pa.list_(pa.binary())), nullable=False),
    ]
)
ERRORS_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("code", pa.int32(), nullable=False),
        pa.field("class", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ]
)
ERRORS = "errors"  # the output of writes that failed in the pipeline (ERRORS_SCHEMA)
OUTCOMES = "outcomes"  # the output of conditional writes' outcomes
# when TTL'd data of a partition expires, for feeds with EXPIRY_EVENTS (swept by the session)
EXPIRY_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("expiry_s", pa.int64(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
    ]
)


def expiry_output(table_id: str) -> str:
    return f"expiry/{table_id}"


def base_output(schema: TableSchema) -> str:
    return f"base/{schema.table_id}"


def log_output(schema: TableSchema) -> str:
    return f"log/{schema.table_id}"


def log_arrow_schema(log: TableSchema) -> pa.Schema:
    """A log output's columns: the internal ones, the log table's by physical name and type
    (``schema.physical``), then ``TICKS``."""
    layout = log.physical_layout
    fields = [pa.field(column_name(log, c.name), value_type(c.type, layout)) for c in log.columns]
    return pa.schema([*LOG_INTERNAL, *fields, pa.field(TICKS, pa.int64())])


def log_rows_to_arrow(
    log: TableSchema, rows: list[dict[str, Any]], internal: list[tuple[int, bytes, int, int]]
) -> pa.Table:
    """Log rows (by CQL name) and each one's internal columns (``_bucket``, ``_pk``,
    ``_seq``, ``_expiry_s``: kept apart, a CQL column may have any of their names) as a log
    output's table. A row holds only the columns its change has; a column no row has is one
    null array shared by every such column of its type, so a wide table's log rows cost
    what their cells cost, not what the table's columns do."""
    schema = log_arrow_schema(log)
    present: set[str] = set().union(*rows) if rows else set()
    nulls = NullColumns(len(rows), none_array)
    arrays: list[pa.Array] = [
        pa.array([row[i] for row in internal], f.type) for i, f in enumerate(LOG_INTERNAL)
    ]
    times: pa.Array = pa.array([], pa.string())
    for col, f in zip(log.columns, list(schema)[len(LOG_INTERNAL) : -1], strict=True):
        name = col.name
        if name not in present:
            arrays.append(nulls(f.type))
            continue
        try:
            array = _log_column(col.type, [row.get(name) for row in rows])
        except (pa.ArrowException, InvalidRequest):
            # an image of a value written empty before the table had CDC (writes of an empty
            # value to a CDC table are refused): null, as every driver reads an empty value
            cells = [row.get(name) for row in rows]
            if EMPTY not in cells:
                raise
            array = _log_column(col.type, [None if v is EMPTY else v for v in cells])
        arrays.append(conform(array, f.type))
        if name == TIME:
            times = arrays[-1]
    arrays.append(pa.array(timeuuid_ticks(times) if rows else [], pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


def _log_column(ctype: CqlType, values: list[Any]) -> pa.Array:
    if not ctype.arrow_as_is:
        convert = ctype.to_arrow
        values = [convert(v) for v in values]
    return pa.array(values, ctype.arrow_type())


def error_rows(keys: pa.Table, errors: Sequence[CqlError]) -> pa.Table:
    """The ``errors`` rows reporting each write of ``keys`` (its ``bucket``, ``pk`` and
    ``seq`` columns) as failed with the error at the same position: the one builder of
    error rows (the row path's refused writes, held and skipped records)."""
    return pa.table(
        {
            "bucket": keys.column("bucket"),
            "pk": keys.column("pk"),
            "seq": keys.column("seq"),
            "code": pa.array([e.code for e in errors], pa.int32()),
            "class": pa.array([e.class_name for e in errors], pa.string()),
            "message": pa.array([e.message for e in errors], pa.string()),
        },
        schema=ERRORS_SCHEMA,
    )
