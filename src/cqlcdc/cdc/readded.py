"""Log rows of a log column dropped and added again under its name.

ScyllaDB drops a base column's log columns with it (and a re-attached log's columns its base
lost meanwhile; the log's ``TableSchema.dropped``), so their cells written before the drop
(a log row's cells carry its write's timestamp) are not the new columns' once the name is
added back. A log file keeps those values; a log read hides them here, by the write time
``cdc$time`` holds, as a base read hides the base cells (``Partition.hide_dropped``).

>>> from cqlcdc.storage.vectorized import timeuuid_strings
>>> import numpy as np
>>> times = timeuuid_strings(np.array([10, 30]), np.zeros(2, np.uint64))
>>> t = pa.table({"cdc$time": times, "v": [1, 2]})
>>> hide_readded(t, {"v": 20}).column("v").to_pylist()
[None, 2]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.log_table import TIME
from cqlcdc.storage.vectorized import timeuuid_ticks, timeuuid_time


def hide_readded(table: pa.Table, readded: Mapping[str, int]) -> pa.Table:
    """``table`` (log rows with ``cdc$time``) with the values of the ``readded`` columns
    that were written at or before their column's drop set to null."""
    present = [name for name in readded if name in table.column_names]
    if not present or not table.num_rows:
        return table
    ticks = timeuuid_ticks(table.column(TIME))
    for name in present:
        old = ticks <= timeuuid_time(np.array([readded[name]]))[0]
        if not old.any():
            continue
        column = table.column(name)
        hidden = pc.if_else(pa.array(old), pa.nulls(len(old), column.type), column)
        table = table.set_column(table.column_names.index(name), name, hidden)
    return table
