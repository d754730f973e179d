"""Staged outputs: the ones the processor finishes in one pass over the whole batch.

Most outputs are final as each bucket task writes them; a staged one (``processor.is_staged``:
dense per-partition feed offsets) is handed back to the processor once per batch, in the
driver, after every bucket ran (``finalize_staged``), one pass per table.

>>> finalize_staged(processor, tables_dir, files, manifest, 7, 120, {})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cqlcdc.datadir.commit import DataFile, Manifest, write_data_file
from cqlcdc.datadir.containment import one_line, output_table_id, table_tag
from cqlcdc.datadir.records import BucketProcessor
from cqlcdc.errors import ServerError
from cqlcdc.location import Location


def finalize_staged(
    processor: BucketProcessor,
    tables_dir: Location,
    files: list[DataFile],
    manifest: Manifest,
    batch_id: int,
    max_seq: int,
    staged_in_memory: dict[str, list[pa.Table]],
) -> tuple[list[DataFile], dict[str, Any]]:
    """Let the processor turn staged outputs into final ones in the driver.

    Some outputs need one sequential pass over the whole batch (dense per-partition feed
    offsets). Their files, written by the bucket tasks, are read back here, handed to
    ``processor.finalize_batch`` with the processor's state from the manifest, and
    replaced by the returned tables (a batch run in the driver hands them over in memory,
    ``staged_in_memory``). Deterministic: a replayed batch gets the same rows.

    Returns:
        The batch's data files (the staged ones replaced by the final ones) and the
        processor's state for the new manifest (``Manifest.extra``).

    Raises:
        ServerError: a table's pass failed, tagged with its table (contained alone).
    """
    staged = processor.is_staged
    finalize = processor.finalize_batch
    keep: list[DataFile] = []
    tables: dict[str, list[pa.Table]] = {
        out: list(parts) for out, parts in staged_in_memory.items()
    }
    for f in files:
        if staged(f.output):
            path = tables_dir / f.output / f.path
            source = str(path.path) if path.is_local else path.open_input()
            tables.setdefault(f.output, []).append(pq.read_table(source))
            path.delete()
        else:
            keep.append(f)
    inputs = {
        out: pa.concat_tables(parts, promote_options="default") for out, parts in tables.items()
    }
    # one pass per table, so a failure is that table's (``contain``); the state threads
    # through the passes in table order. No staged rows: one pass over none.
    by_table: dict[str, dict[str, pa.Table]] = {}
    for out, rows in inputs.items():
        by_table.setdefault(output_table_id(out) or "", {})[out] = rows
    extra = dict(manifest.extra)
    outputs: dict[str, pa.Table] = {}
    for table_id, staged_rows in sorted(by_table.items()) or [("", {})]:
        try:
            made, extra = finalize(batch_id, max_seq, staged_rows, extra)
        except (OSError, MemoryError):
            raise
        except Exception as err:
            if not table_id:
                raise
            raise ServerError(
                f"{table_tag(table_id)} cannot finalize the staged outputs of batch "
                f"{batch_id}: {type(err).__name__}: {one_line(str(err))}"
            ) from err
        outputs.update(made)
    for output in sorted(outputs):
        if outputs[output].num_rows:
            keep.append(write_data_file(tables_dir, output, outputs[output], batch_id))
    return keep, extra
