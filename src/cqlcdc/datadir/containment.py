"""Containment: a table whose write cannot be applied stops alone; every other table goes on.

When the pipeline meets a record it cannot apply (a defect, or an output that refuses the
table's rows), the failure is attributed to its table, the table is recorded as stopped in
``stopped.json`` and the micro-batch is run again with that table's records held: kept, not
applied, in the ``held`` output (committed with the batch, so trimming the ingest log cannot
lose them) and reported as failed to their writers through ``errors``. New writes to the
table are refused. ``cqlcdc recover`` shows stopped tables and either drops their held
writes (``--skip-table``) or appends them again (``--retry-table``), under the data
directory's lock.

>>> failed_table("... [in table 3f2a] ...")
'3f2a'
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from cqlcdc.datadir.commit import Manifest, Snapshot
from cqlcdc.datadir.ingest import IngestLog
from cqlcdc.datadir.lease import Lease
from cqlcdc.datadir.records import INGEST_SCHEMA, IngestRecord
from cqlcdc.datadir.recovery import write_json
from cqlcdc.errors import InvalidRequest, ServerError
from cqlcdc.failure_text import failed_table, table_tag, untagged
from cqlcdc.location import Location

STOPPED_FILE = "stopped.json"
# the output holding the records of stopped tables (INGEST_SCHEMA: the records as appended)
HELD = "held"
HELD_SCHEMA = INGEST_SCHEMA
# the longest error text kept for a stopped table (a log line, a writer's message)
_ERROR_CHARS = 500


def one_line(text: str) -> str:
    """The first line of an error's text: delta-rs appends a native backtrace to its
    messages, which belongs in no log line or client error."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def error_line(error_text: str) -> str:
    """The one line of a failure's text that says what went wrong (the tagged line of a
    Spark task's traceback), without the tag, clipped."""
    lines = [ln.strip() for ln in error_text.splitlines() if ln.strip()]
    tagged = [ln for ln in lines if failed_table(ln) is not None]
    line = untagged((tagged or lines or [""])[-1 if not tagged else 0])
    if len(line) > _ERROR_CHARS:
        line = f"{line[:_ERROR_CHARS]}..."
    return line


def output_table_id(output: str) -> str | None:
    """The table an output belongs to (``base/<id>``, ``feed/<id>/<topic>``...), or None for
    the outputs every table shares (``errors``, ``outcomes``, ``held``)."""
    parts = output.split("/")
    return parts[1] if len(parts) >= 2 else None


@contextmanager
def failures_of_output(output: str, action: str) -> Iterator[None]:
    """Tag a failure to ``action`` (write, commit) ``output`` with the output's table, so
    the engine stops that table alone. A failure about no table's rows (the disk, memory, a
    shared output) passes as it is and stops the pipeline."""
    try:
        yield
    except (OSError, MemoryError):
        raise
    except Exception as err:
        table_id = output_table_id(output)
        if table_id is None:
            raise
        raise ServerError(
            f"{table_tag(table_id)} cannot {action} output {output}: {type(err).__name__}: "
            f"{one_line(str(err))}"
        ) from err


@dataclass(frozen=True, slots=True)
class StoppedTable:
    """A table the pipeline stopped applying at ``first_seq`` (in batch ``batch_id``)."""

    table_id: str
    table: str  # keyspace.name when it stopped
    first_seq: int
    batch_id: int
    error: str

    def held_message(self, data_dir: Location | str | os.PathLike[str], seq: int) -> str:
        """What the writer of a held write is told."""
        return (
            f"write seq={seq} to {self.table} was not applied: the table is stopped since "
            f"write seq={self.first_seq} could not be applied ({self.error}). The write is "
            f"held; run `cqlcdc recover --data-dir {data_dir}` to retry or drop it"
        )

    def refusal(self, data_dir: Location | str | os.PathLike[str]) -> ServerError:
        """The error a new write to the stopped table gets up front."""
        return ServerError(
            f"Table {self.table} is stopped: write seq={self.first_seq} could not be applied "
            f"({self.error}); it takes no writes until `cqlcdc recover --data-dir {data_dir} "
            f"--retry-table {self.table}` (or --skip-table) is run with the server stopped"
        )

    def log_line(self, data_dir: Location | str | os.PathLike[str]) -> str:
        """The one line the server logs when the table stops."""
        return (
            f"table {self.table} stopped at write seq={self.first_seq} (batch "
            f"{self.batch_id}): {self.error}; its writes are held and every other table goes "
            f"on; to resume it, stop the server and run: cqlcdc recover --data-dir {data_dir} "
            f"--retry-table {self.table} (or --skip-table {self.table} to drop its held writes)"
        )


def load_stopped(data_dir: Location | str | os.PathLike[str]) -> dict[str, StoppedTable]:
    """The stopped tables of a data directory, by table id."""
    text = (Location.of(data_dir) / STOPPED_FILE).read_text()
    if text is None:
        return {}
    return {entry["table_id"]: StoppedTable(**entry) for entry in json.loads(text)}


def save_stopped(
    data_dir: Location | str | os.PathLike[str], stopped: dict[str, StoppedTable]
) -> None:
    """Write ``stopped.json`` durably (replacing it whole)."""
    path = Location.of(data_dir) / STOPPED_FILE
    if not stopped:
        path.delete()
        return
    write_json(path, [dataclasses.asdict(s) for _, s in sorted(stopped.items())])


# --- cqlcdc recover -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoppedReport:
    """A stopped table as ``cqlcdc recover`` shows it."""

    stopped: StoppedTable
    held: int


def stopped_reports(data_dir: Location | str | os.PathLike[str]) -> list[StoppedReport]:
    """Every stopped table, with how many writes it holds (read at the committed batch)."""
    root = Location.of(data_dir)
    stopped = load_stopped(root)
    if not stopped:
        return []
    held = _held(root)
    counts = pc.value_counts(held.column("table_id")).to_pylist() if held.num_rows else []
    by_table = {c["values"]: c["counts"] for c in counts}
    return [StoppedReport(s, by_table.get(s.table_id, 0)) for _, s in sorted(stopped.items())]


def resume_table(
    data_dir: Location | str | os.PathLike[str], table: str, retry: bool
) -> tuple[StoppedTable, int]:
    """Let a stopped table take writes again (under the data directory's lock, so no
    engine runs meanwhile).

    Its held writes are appended again to the ingest log in their original order
    (``retry``; new seqs, after every other write) or dropped for good. Commits the failed
    batch left in the table's outputs beyond the manifest are undone first, so nothing of
    that batch is applied twice. Returns the table and how many held writes it had.

    Raises:
        DataDirLocked: a process holds the data directory.
        InvalidRequest: no stopped table has that name (or id).
    """
    root = Location.of(data_dir)
    with Lease(root):
        stopped = load_stopped(root)
        found = [s for s in stopped.values() if table in (s.table, s.table_id)]
        if not found:
            names = ", ".join(sorted(s.table for s in stopped.values())) or "none"
            raise InvalidRequest(f"table {table} is not stopped (stopped tables: {names})")
        entry = found[0]
        manifest = Manifest.load(root)
        manifest = _undo_uncommitted(root / "tables", manifest, entry.table_id)
        held = _held(root)
        mine = held.filter(pc.equal(held.column("table_id"), entry.table_id))
        mine = mine.sort_by("seq")
        if retry and mine.num_rows:
            log = IngestLog(root / "ingest")
            first = max(log.last_seq(), manifest.max_seq) + 1
            log.append(
                [
                    IngestRecord(first + i, **{k: row[k] for k in row if k != "seq"})
                    for i, row in enumerate(mine.to_pylist())
                ]
            )
        if mine.num_rows:
            version = _delete_held(root / "tables", entry.table_id)
            manifest = dataclasses.replace(manifest, versions={**manifest.versions, HELD: version})
            manifest.save(root)
        del stopped[entry.table_id]
        save_stopped(root, stopped)
        return entry, mine.num_rows


def drop_held(data_dir: Location | str | os.PathLike[str], seqs: range) -> int:
    """Drop the held writes ``seqs`` for good (``cqlcdc recover --skip``: the one write a
    stopped table cannot apply, before ``--retry-table`` appends the others again). Under
    the data directory's lock. Returns how many were held.

    Raises:
        DataDirLocked: a process holds the data directory.
    """
    root = Location.of(data_dir)
    with Lease(root):
        held = _held(root)
        if held.num_rows == 0:
            return 0
        seq = held.column("seq")
        found: int = held.filter(
            pc.and_(pc.greater_equal(seq, seqs.start), pc.less(seq, seqs.stop))
        ).num_rows
        if found:
            table = _delta_table(root / "tables" / HELD)
            table.delete(f"seq >= {seqs.start} AND seq < {seqs.stop}")
            manifest = Manifest.load(root)
            versions = {**manifest.versions, HELD: table.version()}
            dataclasses.replace(manifest, versions=versions).save(root)
        return found


def _held(root: Location) -> pa.Table:
    manifest = Manifest.load(root)
    if manifest.version_of(HELD) is None:
        return HELD_SCHEMA.empty_table()
    return Snapshot(root / "tables", manifest).read(HELD)


def _delta_table(where: Location) -> DeltaTable:
    """The latest version of the Delta table at ``where``, to change it."""
    return DeltaTable(where.delta_uri, storage_options=where.delta_options())


def _delete_held(tables_dir: Location, table_id: str) -> int:
    table = _delta_table(tables_dir / HELD)
    table.delete(f"table_id = '{table_id}'")
    return table.version()


def _table_outputs(tables_dir: Location, table_id: str) -> list[str]:
    """The outputs of ``table_id`` that have a Delta table (``<kind>/<id>`` or
    ``<kind>/<id>/<topic>``): a LIST per output kind, and one per nested output."""
    found: list[str] = []
    for kind in tables_dir.list_names():
        own = tables_dir.child(kind, table_id)
        names = own.list_names()
        if "_delta_log" in names:  # a table (its entries are its files: not listed)
            found.append(f"{kind}/{table_id}")
            continue
        found.extend(
            f"{kind}/{table_id}/{name}"
            for name in names
            if "_delta_log" in own.child(name).list_names()
        )
    return sorted(found)


def _remove_tree(where: Location) -> None:
    """Delete a directory and everything under it (every object under the prefix)."""
    if where.is_local:
        shutil.rmtree(where.path, ignore_errors=True)
    else:
        where.filesystem.delete_dir(where.fs_path)


def _undo_uncommitted(tables_dir: Location, manifest: Manifest, table_id: str) -> Manifest:
    """Undo the commits a failed batch left in ``table_id``'s outputs past the manifest:
    they hold writes that were never applied (a retry appends them again). An output the
    manifest does not know at all was made by that batch alone and is removed."""
    versions = dict(manifest.versions)
    for output in _table_outputs(tables_dir, table_id):
        root = tables_dir.child(output)
        known = versions.get(output)
        if known is None:
            _remove_tree(root)
            continue
        table = _delta_table(root)
        if table.version() > known:
            table.restore(known)
            table.update_incremental()
            versions[output] = table.version()
    if versions == manifest.versions:
        return manifest
    updated = dataclasses.replace(manifest, versions=versions)
    updated.save(tables_dir.parent)
    return updated


__all__ = [
    "HELD",
    "HELD_SCHEMA",
    "STOPPED_FILE",
    "StoppedReport",
    "StoppedTable",
    "drop_held",
    "error_line",
    "failed_table",
    "failures_of_output",
    "load_stopped",
    "one_line",
    "output_table_id",
    "resume_table",
    "save_stopped",
    "stopped_reports",
    "table_tag",
]
