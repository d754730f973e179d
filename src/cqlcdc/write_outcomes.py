"""What the pipeline recorded of a write's outcome, read once the write is committed.

Some outcomes are known only once the micro-batch has applied a write: the errors of writes
it could not apply (a list index out of range) and a conditional write's result (``[applied]``
and the old row). The pipeline records them in two outputs, ``errors`` and ``OUTCOMES``; a
writer reads them, as ``cqlcdc.reads`` reads the tables, from the engine's snapshot.

>>> errors = pipeline_errors(coordinator, first_seq, last_seq)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cqlcdc.cdc.outputs import OUTCOMES
from cqlcdc.cql import ast
from cqlcdc.errors import CqlError, InvalidRequest, ServerError
from cqlcdc.storage.conditions import result_columns
from cqlcdc.storage.select import ResultSet
from cqlcdc.types import native_type

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator


def pipeline_errors(coordinator: Coordinator, first: int, last: int) -> dict[int, CqlError]:
    """Errors the pipeline recorded for writes ``first..last`` (e.g. a list index), by seq."""
    snap = coordinator.engine.snapshot()
    if snap.version_of("errors") is None:
        return {}
    window: list[tuple[str, str, Any]] = [("seq", ">=", first), ("seq", "<=", last)]
    errs = snap.read("errors", window, prune=window)  # files by their seq statistics
    out: dict[int, CqlError] = {}
    for row in errs.sort_by("seq").to_pylist():
        cls = CqlError.by_code.get(row["code"], InvalidRequest)
        out[row["seq"]] = cls(row["message"])
    return out


def conditional_result(
    coordinator: Coordinator, stmt: ast.Statement, seq: int, keyspace: str | None
) -> ResultSet:
    """The result set of the conditional write committed as ``seq``: ScyllaDB's
    ``[applied]`` and the old row's columns, one row per statement
    (``cqlcdc.storage.conditions``).

    Raises:
        ServerError: the pipeline recorded no outcome for ``seq``.
    """
    statements = stmt.statements if isinstance(stmt, ast.Batch) else (stmt,)
    writes = [s for s in statements if isinstance(s, ast.Insert | ast.Update | ast.Delete)]
    schema = coordinator.table(writes[0].table, keyspace)
    names = list(result_columns(schema, writes, isinstance(stmt, ast.Batch)))
    types = [c.type.frozen() for n in names if (c := schema.column(n)) is not None]
    snap = coordinator.engine.snapshot()
    if snap.version_of(OUTCOMES) is None:
        raise ServerError(f"The outcome of conditional write seq={seq} was not recorded")
    window: list[tuple[str, str, Any]] = [("seq", ">=", seq), ("seq", "<=", seq)]
    found = snap.read(OUTCOMES, window, prune=window).to_pylist()
    if not found:
        raise ServerError(f"The outcome of conditional write seq={seq} was not recorded")
    outcome = found[0]
    rows = [
        (
            outcome["applied"],
            *(
                None if cell is None else ctype.deserialize(cell)
                for cell, ctype in zip(row, types, strict=True)
            ),
        )
        for row in outcome["rows"]
    ]
    return ResultSet(["[applied]", *names], [native_type("boolean"), *types], rows)


__all__ = ["conditional_result", "pipeline_errors"]
