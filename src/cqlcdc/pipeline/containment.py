"""The writes a micro-batch does not apply: those of stopped tables, and those skipped.

A table whose write the pipeline cannot apply stops alone (``contain``): its records are
held from then on (the ``held`` output, an error row each), and its outputs are left as
they are for ``cqlcdc recover``. A record ``cqlcdc recover --skip`` named is dropped with an
error row. What stopped.json and failure.json hold is the data directory's format
(``cqlcdc.datadir.containment``, ``cqlcdc.datadir.recovery``); this is the engine's side.

>>> records, files = containment.set_aside(batch, batch_id)  # doctest: +SKIP
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.outputs import error_rows
from cqlcdc.datadir.commit import DataFile, write_data_file
from cqlcdc.datadir.containment import (
    HELD,
    StoppedTable,
    error_line,
    failed_table,
    load_stopped,
    output_table_id,
    save_stopped,
)
from cqlcdc.datadir.records import INGEST_SCHEMA, BucketProcessor
from cqlcdc.datadir.recovery import load_skipped, save_failure, unapplied_failure
from cqlcdc.errors import ServerError, UnappliedWrite
from cqlcdc.location import Location
from cqlcdc.observe import events


class Containment:
    """The stopped tables and the skipped records of one engine, and what a batch does
    with their records.

    Args:
        data_dir: the data directory (stopped.json, skipped.json, failure.json).
        tables_dir: root of the output tables (``held``, ``errors``).
        processor: the core (names a table by its id).
    """

    def __init__(
        self, data_dir: Location, tables_dir: Location, processor: BucketProcessor
    ) -> None:
        self.data_dir = data_dir
        self.tables_dir = tables_dir
        self.processor = processor
        # seqs `cqlcdc recover` told the engine to drop, with the error each reports
        self.skipped: dict[int, str] = {}
        # tables whose records are held, not applied (``cqlcdc.datadir.containment``); replaced
        # whole when one is added, so readers in other threads need no lock
        self.stopped: dict[str, StoppedTable] = load_stopped(data_dir)
        # the records the batch being applied runs the core on (a failure's table is one of
        # theirs)
        self.attempt_records: pa.Table = INGEST_SCHEMA.empty_table()

    def load(self) -> None:
        """Read what ``cqlcdc recover`` left (it runs only while no engine does): at start."""
        self.skipped = load_skipped(self.data_dir)
        self.stopped = load_stopped(self.data_dir)

    def set_aside(self, records: pa.Table, batch_id: int) -> tuple[pa.Table, list[DataFile]]:
        """The records of a batch the core is to apply (without the skipped ones and those
        of stopped tables), and the files that report and keep the others."""
        records, skipped = self._drop_skipped(records, batch_id)
        self.attempt_records = records
        records, held = self._hold_stopped(records, batch_id)
        return records, skipped + held

    def contain(self, err: Exception, batch_id: int) -> bool:
        """Stop the table a failure is attributed to: record it durably, log one line, and
        say the batch may run again (its records then held). False when the failure names
        no table of this batch, or one already stopped: the query stops as before.

        Exactly once still holds: the outputs this attempt committed are committed again
        as no-ops (same batch id, same rows: other tables' groups do not depend on the
        stopped one); the stopped table's own outputs, which may hold commits past the
        manifest, are never committed again until ``cqlcdc recover`` undoes those."""
        table_id = failed_table(str(err))
        if table_id is None or table_id in self.stopped:
            return False
        records = self.attempt_records
        seqs = records.filter(pc.equal(records.column("table_id"), table_id)).column("seq")
        if len(seqs) == 0:
            return False
        entry = StoppedTable(
            table_id=table_id,
            table=self.processor.table_name(table_id),
            first_seq=int(pc.min(seqs).as_py()),
            batch_id=batch_id,
            error=error_line(str(err)),
        )
        stopped = {**self.stopped, table_id: entry}
        save_stopped(self.data_dir, stopped)
        self.stopped = stopped
        events.table_stopped(entry.log_line(self.data_dir))
        return True

    def stopped_at(self, err: Exception, batch_id: int) -> Exception:
        """The error waiting writers get when a batch fails: for a record the core cannot
        apply, one that names it and says how to go on without it (``failure.json`` keeps
        it for ``cqlcdc recover``); any other error as it is."""
        failure = unapplied_failure(str(err), batch_id)
        if failure is None:
            return err
        save_failure(self.data_dir, failure)
        return UnappliedWrite(
            f"The pipeline stopped at a write it cannot apply ({failure.message}). Later "
            "writes wait behind it and every other acknowledged write is kept. To go on "
            f"without this write (it is then reported as failed): close every session, run "
            f"`cqlcdc recover --data-dir {self.data_dir} --skip {failure.skip_argument()}`, "
            "and reopen the data directory."
        )

    def _hold_stopped(self, records: pa.Table, batch_id: int) -> tuple[pa.Table, list[DataFile]]:
        """The records without those of stopped tables, and the files that keep them: the
        ``held`` output (the records as appended, for ``cqlcdc recover``) and one error row
        each (``errors``: a writer waiting for it is told at once)."""
        stopped = self.stopped
        if not stopped or records.num_rows == 0:
            return records, []
        hold = pc.is_in(records.column("table_id"), pa.array(sorted(stopped), pa.string()))
        held = records.filter(hold)
        if held.num_rows == 0:
            return records, []
        messages = [
            stopped[table_id].held_message(self.data_dir, seq)
            for table_id, seq in zip(
                held.column("table_id").to_pylist(), held.column("seq").to_pylist(), strict=True
            )
        ]
        errors = error_rows(held, [ServerError(message) for message in messages])
        files = [
            write_data_file(self.tables_dir, HELD, held.cast(INGEST_SCHEMA), batch_id),
            write_data_file(self.tables_dir, "errors", errors, batch_id),
        ]
        return records.filter(pc.invert(hold)), files

    def output_stopped(self, output: str) -> bool:
        """Whether `output` belongs to a stopped table: no maintenance touches it, since it
        may hold a failed batch's commit past the manifest (``cqlcdc recover`` undoes it)."""
        table_id = output_table_id(output)
        return table_id is not None and table_id in self.stopped

    def _drop_skipped(self, records: pa.Table, batch_id: int) -> tuple[pa.Table, list[DataFile]]:
        """The records without those ``cqlcdc recover`` skipped, and the error rows that
        report each skipped one as failed (``errors``, read by a writer waiting for it)."""
        if not self.skipped or records.num_rows == 0:
            return records, []
        drop = pc.is_in(records.column("seq"), pa.array(sorted(self.skipped), pa.int64()))
        dropped = records.filter(drop)
        if dropped.num_rows == 0:
            return records, []
        seqs = dropped.column("seq").to_pylist()
        errors = error_rows(dropped, [ServerError(self.skipped[seq]) for seq in seqs])
        error_file = write_data_file(self.tables_dir, "errors", errors, batch_id)
        return records.filter(pc.invert(drop)), [error_file]
