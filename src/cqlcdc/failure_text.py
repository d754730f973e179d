"""How a pipeline failure names what it is about, in its text: the one writer and reader.

A failure may reach the driver only as text (a Spark task's error arrives as the executor's
traceback), so what it is about travels in the message: the table it belongs to
(``[in table <id>]``, read by containment to stop that table alone) and the ingest records
that could not be applied (``cannot apply ingest record seq=N`` or ``... records
seq=A..B``, read by recovery to record ``failure.json`` and skip them). The core, the engine
and the data directory's recovery all write or read these marks, so they are made and parsed
here only; a change to one side cannot leave the other behind.

>>> text = f"{table_tag('3f2a')} {cannot_apply(4, 9, 'table id 3f2a', 'KeyError: x')}"
>>> failed_table(text)
'3f2a'
>>> unapplied_records(text).message
'cannot apply ingest records seq=4..9 (table id 3f2a): KeyError: x'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = re.compile(r"\[in table ([0-9A-Za-z_.-]+)\]")
_UNAPPLIED = re.compile(r"cannot apply ingest records? seq=(\d+)(?:\.\.(\d+))?")


def table_tag(table_id: str) -> str:
    """The mark a failure carries to name the table it belongs to (``failed_table``)."""
    return f"[in table {table_id}]"


def failed_table(error_text: str) -> str | None:
    """The table id a failure's text is tagged with (None: not attributed to a table)."""
    match = _TAG.search(error_text)
    return match.group(1) if match else None


def untagged(line: str) -> str:
    """``line`` without its table tags, its spaces collapsed."""
    return " ".join(_TAG.sub("", line).split())


def cannot_apply(first_seq: int, last_seq: int | None, where: str, cause: str) -> str:
    """The text naming ingest records the pipeline cannot apply: one record (``last_seq``
    None: the core knows which) or the range ``first_seq..last_seq`` (the engine could not
    tell which of a bucket's records failed); ``where`` says whose (table, bucket,
    partition), ``cause`` what went wrong."""
    seqs = f"record seq={first_seq}" if last_seq is None else f"records seq={first_seq}..{last_seq}"
    return f"cannot apply ingest {seqs} ({where}): {cause}"


@dataclass(frozen=True, slots=True)
class UnappliedRecords:
    """The records a failure's text names (``cannot_apply``), and the text from there on
    to the end of its line."""

    first_seq: int
    last_seq: int
    message: str


def unapplied_records(error_text: str) -> UnappliedRecords | None:
    """The records an error's text says cannot be applied (None: the error is not about a
    record, e.g. a full disk)."""
    match = _UNAPPLIED.search(error_text)
    if match is None:
        return None
    first = int(match.group(1))
    last = int(match.group(2) or first)
    line = next(ln for ln in error_text.splitlines() if match.group(0) in ln)
    return UnappliedRecords(first, last, line[line.index(match.group(0)) :].strip())


__all__ = [
    "UnappliedRecords",
    "cannot_apply",
    "failed_table",
    "table_tag",
    "unapplied_records",
    "untagged",
]
