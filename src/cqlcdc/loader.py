"""Bulk loads: CSV, Parquet and JSON-lines rows bound to a prepared write, or CQL files.

Each input row binds the markers of one prepared INSERT/UPDATE/DELETE (by default an INSERT of
the file's columns), like the drivers' prepared statements and cqlsh ``COPY FROM``. Rows go to
the engine in chunks, one durable ingest append per chunk and one commit wait at the end, with
the same guarantees as any write; typed columns (Parquet, JSON lines, CSV of integer and text
columns) bound to a simple write stay columnar (``Session.execute_arrow``, the bulk path).
A failed row is reported with its file and row number; the others are applied.

>>> result = load(session, "ks.t", ["rows.csv"])  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cql import ast, bind_markers, parse_statement, parse_term, render
from cqlcdc.cql.render import quote_identifier
from cqlcdc.errors import CqlError, CqlSyntaxError, FunctionFailure, InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.types.arrow import exact_type, to_pylist
from cqlcdc.types.base import CqlType

# types whose CSV text is the value itself (as cqlsh COPY FROM reads them)
_TEXTUAL = {"ascii", "text", "varchar", "inet", "date", "time", "timestamp"}


# errors about one row's values: the row is reported and the load goes on; any other error
# (the server failing, a timeout, a missing permission) is about every row after it too
_ROW_ERRORS = (InvalidRequest, FunctionFailure)


@dataclass
class LoadResult:
    """What a load did: rows acknowledged (durable), failures (file, row number, error),
    seconds taken, and, when it stopped part way, where and why."""

    rows: int = 0
    failed: list[tuple[str, int, CqlError]] = field(default_factory=list)
    seconds: float = 0.0
    stopped: tuple[str, int, CqlError] | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def _csv_converter(ctype: CqlType, column: str) -> Callable[[str | None], Any]:
    """CSV text -> value: empty is null; text-like types take the text as is; others parse
    as a CQL literal (``{1: 'a'}``, ``0xcafe``, ``true``, uuids, numbers)."""
    textual = ctype.cql_name in _TEXTUAL

    def convert(text: str | None) -> Any:
        if text is None or text == "":
            return None
        try:
            term: ast.Term = ast.Constant("string", text) if textual else parse_term(text)
        except CqlSyntaxError:
            raise InvalidRequest(
                f"Invalid value {text!r} for column {column} of type {ctype.cql_name}"
            ) from None
        return ctype.frozen().parse_literal(term, column)

    return convert


def _is_csv(path: Path) -> bool:
    return path.name.endswith((".csv", ".csv.gz"))


def _csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's header row (as pyarrow's reader parses it)."""
    import csv
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as source:
        return next(csv.reader(source), [])


def _read_batches(path: Path, chunk: int) -> Iterator[pa.Table]:
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk):
            yield pa.Table.from_batches([batch])
    elif suffix in (".csv", ".csv.gz"):
        import pyarrow.csv as pacsv

        # every column as text from the start: the CQL types decide how to read them (type
        # inference would read 0x00ff as 255 and a text 007 as 7 before any cast)
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 22),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in _csv_header(path)},
                strings_can_be_null=False,
                auto_dict_encode=False,
            ),
        )
        for batch in reader:
            yield pa.Table.from_batches([batch])
    elif suffix in (".jsonl", ".ndjson", ".json"):
        import pyarrow.json as pajson

        table = pajson.read_json(path)
        for start in range(0, table.num_rows, chunk):
            yield table.slice(start, chunk)
    else:
        raise InvalidRequest(f"{path}: unknown input format (use .csv, .parquet or .jsonl)")


def _statement_for(
    schema: TableSchema, columns: Sequence[str], statement: str | None
) -> ast.Statement:
    if statement is not None:
        stmt = parse_statement(statement)
        if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
            raise InvalidRequest("A load binds rows to an INSERT, UPDATE or DELETE")
        return stmt
    unknown = [c for c in columns if schema.column(c) is None]
    if unknown:
        raise InvalidRequest(f"Unknown column {unknown[0]} in table {schema.qualified_name}")
    # quoted: a file's column "SomeColumn" is that column, not somecolumn
    names = ", ".join(quote_identifier(c) for c in columns)
    marks = ", ".join("?" for _ in columns)
    table = f"{quote_identifier(schema.keyspace)}.{quote_identifier(schema.name)}"
    return parse_statement(f"INSERT INTO {table} ({names}) VALUES ({marks})")


class Progress:
    """Rows, rows/s and ETA on one terminal line (only when ``out`` is a terminal; default:
    the standard error of the moment, not of the import)."""

    def __init__(self, total: int | None, out: TextIO | None = None) -> None:
        self.total = total
        out = out if out is not None else sys.stderr
        self.out = out
        self.start = time.monotonic()
        self.enabled = out.isatty()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = done / elapsed
        eta = ""
        if self.total and rate > 0:
            eta = f", ETA {max(self.total - done, 0) / rate:,.0f} s"
        total = f"/{self.total:,}" if self.total else ""
        self.out.write(f"\r{done:,}{total} rows, {rate:,.0f} rows/s{eta}   ")
        self.out.flush()

    def close(self) -> None:
        if self.enabled:
            self.out.write("\n")


def _count_rows(paths: Sequence[Path]) -> int | None:
    total = 0
    for p in paths:
        if p.suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            total += pq.ParquetFile(p).metadata.num_rows
        else:
            return None
    return total


def load(
    session: Any,
    table: str,
    paths: Sequence[str | Path],
    *,
    statement: str | None = None,
    columns: Sequence[str] | None = None,
    chunk: int = 50_000,
    progress: Progress | None = None,
) -> LoadResult:
    """Load rows from files into ``table`` through ``session``.

    Args:
        session: a ``cqlcdc`` Session.
        table: ``keyspace.table``.
        paths: CSV (header row), Parquet or JSON-lines files.
        statement: a write with bind markers; positional ``?`` take the file's columns in
            order, ``:name`` markers the column of that name. Default: INSERT of the columns.
        columns: the file columns to use (default: all).
        chunk: rows per durable ingest append (the load waits for the commit at the end).
        progress: a Progress line to update.

    Returns:
        The rows applied and the rows that failed (file, row number, error).
    """
    from cqlcdc.session import PreparedStatement

    ks, _, name = table.rpartition(".")
    schema = session.table_schema(ast.QualifiedName(ks or None, name))
    result = LoadResult()
    started = time.monotonic()
    done = 0
    for raw_path in paths:
        path = Path(raw_path)
        row_no = 0
        stmt: ast.Statement | None = None
        for table_chunk in _read_batches(path, chunk):
            cols = list(columns or table_chunk.column_names)
            if stmt is None:
                stmt = _statement_for(schema, cols, statement)
                named = _has_named_markers(stmt)
                prepared = PreparedStatement(render(stmt), stmt)
            try:
                _load_chunk(
                    session, schema, prepared, named, path, row_no, table_chunk, cols, result
                )
            except CqlError as e:  # the whole chunk failed: none of it is durable
                result.stopped = (str(path), row_no + 1, e)
            if result.stopped is not None:
                result.seconds = time.monotonic() - started
                return result
            row_no += table_chunk.num_rows
            done += table_chunk.num_rows
            if progress is not None:
                progress.update(done)
    session.flush()
    result.seconds = time.monotonic() - started
    return result


def _load_chunk(
    session: Any,
    schema: TableSchema,
    prepared: Any,
    named: bool,
    path: Path,
    row_no: int,
    table_chunk: pa.Table,
    cols: list[str],
    result: LoadResult,
) -> None:
    """Send one chunk of rows and tally each row's outcome into ``result``.

    Raises:
        CqlError: the session refused the whole chunk.
    """
    if not named:
        typed = _typed_columns(schema, table_chunk, cols, _is_csv(path))
        if typed is not None:
            outcomes = session.execute_arrow(prepared, typed, wait=False)
            _count(result, str(path), row_no, [True] * typed.num_rows, outcomes)
            return
    converters = _converters(schema, table_chunk, cols, _is_csv(path))
    data = [to_pylist(table_chunk.column(c)) for c in cols]
    params: list[Any] = []
    for i in range(table_chunk.num_rows):
        try:
            values = [conv(col[i]) for conv, col in zip(converters, data, strict=True)]
        except CqlError as e:
            result.failed.append((str(path), row_no + i + 1, e))
            params.append(None)
            continue
        params.append(dict(zip(cols, values, strict=True)) if named else values)
    good = [p for p in params if p is not None]
    if good:
        outcomes = session.execute_many([prepared] * len(good), good, wait=False)
        _count(result, str(path), row_no, params, outcomes)


def _count(
    result: LoadResult, path: str, row_no: int, params: Sequence[Any], outcomes: Sequence[Any]
) -> None:
    """Tally the outcomes of the rows sent (a None in ``params``: failed before sending).
    The first error that is not about its row's values stops the load there."""
    sent = iter(outcomes)
    for i, p in enumerate(params):
        if p is None:
            continue
        out = next(sent)
        if not isinstance(out, CqlError):
            result.rows += 1
        elif isinstance(out, _ROW_ERRORS):
            result.failed.append((path, row_no + i + 1, out))
        elif result.stopped is None:
            result.stopped = (path, row_no + i + 1, out)


# CSV columns of these types convert column-wise (Arrow's casts read their text as CQL does)
_CSV_CASTS = {"tinyint", "smallint", "int", "bigint", "text", "ascii", "varchar"}


def _typed_columns(
    schema: TableSchema, table: pa.Table, cols: Sequence[str], csv: bool
) -> pa.Table | None:
    """The chunk's columns for ``Session.execute_arrow``: typed inputs as they are, CSV text
    only when every column is of a type whose text Arrow casts exactly (else None: the rows
    are converted one by one, with CQL literal parsing)."""
    selected = table.select(list(cols))
    if not csv:
        converters = _converters(schema, table, cols, csv)
        return selected if all(conv is _identity for conv in converters) else None
    arrays = []
    for c in cols:
        col = schema.column(c)
        if col is None or col.type.cql_name not in _CSV_CASTS:
            return None
        text = selected.column(c)
        # an empty CSV field is null, as in the row-by-row conversion
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        if col.type.cql_name in ("text", "ascii", "varchar"):
            arrays.append(text)
            continue
        stripped = pc.utf8_trim_whitespace(text)
        if not pc.all(pc.match_substring_regex(stripped, r"^-?[0-9]{1,18}$"), min_count=0).as_py():
            return None
        arrays.append(stripped.cast(pa.int64()))  # the column's range is checked by the cast
    return pa.table(dict(zip(cols, arrays, strict=True)))


def _has_named_markers(stmt: ast.Statement) -> bool:
    return any(m.name is not None for m in bind_markers(stmt))


def _converters(
    schema: TableSchema, table: pa.Table, cols: Sequence[str], csv: bool
) -> list[Callable[[Any], Any]]:
    """Per column: CSV text -> value; for typed Parquet/JSON input, a column in cqlcdc's own
    Arrow form of its type (docs/types.md: a decimal as its text, a map as a map...) read
    back as that type reads it, text in a column of another type read as CSV text is, and
    anything else as is (the prepared statement checks it against the column type)."""
    out: list[Callable[[Any], Any]] = []
    for c in cols:
        col = schema.column(c)
        if col is None:
            raise InvalidRequest(f"Unknown column {c} in table {schema.qualified_name}")
        ctype = col.type
        arrow = table.column(c).type
        if csv:
            out.append(_csv_converter(ctype, c))
        elif ctype.arrow_as_is and arrow == ctype.arrow_type():
            out.append(_identity)
        elif arrow in (ctype.arrow_type(), exact_type(ctype.arrow_type())):
            out.append(_from_arrow(ctype))
        elif pa.types.is_string(arrow) and ctype.cql_name not in ("text", "ascii", "varchar"):
            out.append(_csv_converter(ctype, c))
        else:
            out.append(_identity)
    return out


def _from_arrow(ctype: CqlType) -> Callable[[Any], Any]:
    convert = ctype.from_arrow
    return lambda value: None if value is None else convert(value)


def _identity(value: Any) -> Any:
    return value


def count_rows(paths: Sequence[str | Path]) -> int | None:
    """Rows in the inputs when cheap to know (Parquet footers), else None."""
    return _count_rows([Path(p) for p in paths])
