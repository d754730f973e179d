"""The failure text the core and the engine write is what containment and recovery read
back (``cqlcdc.failure_text``): the table a failure is tagged with and the records it names
survive formatting, a Spark task's traceback around them, and text that is not ours gives
nothing."""

from __future__ import annotations

import pytest

from cqlcdc.datadir.containment import error_line
from cqlcdc.datadir.recovery import unapplied_failure
from cqlcdc.failure_text import (
    cannot_apply,
    failed_table,
    table_tag,
    unapplied_records,
    untagged,
)


@pytest.mark.parametrize("table_id", ["3f2a", "ks.t", "a_b-c.9"])
def test_a_table_tag_reads_back_as_its_table(table_id: str) -> None:
    text = f"Traceback ...\nUnappliedWrite: {table_tag(table_id)} boom\n  at executor"
    assert failed_table(text) == table_id
    assert untagged(f"x {table_tag(table_id)}  y") == "x y"


@pytest.mark.parametrize(("first", "last"), [(7, None), (3, 3), (4, 9)])
def test_unapplied_records_read_back_as_their_seqs(first: int, last: int | None) -> None:
    line = cannot_apply(first, last, "table ks.t, bucket 2", "KeyError: 'x'")
    text = f"py4j error\nUnappliedWrite: {table_tag('t1')} {line}\n\tat worker.py"
    records = unapplied_records(text)
    assert records is not None
    assert (records.first_seq, records.last_seq) == (first, first if last is None else last)
    assert records.message == line  # from the mark to the end of its line, without the tag
    assert ("record seq=" in line) == (last is None)  # one record: the core knew which
    failure = unapplied_failure(text, batch_id=5)
    assert failure is not None and failure.batch_id == 5 and failure.message == line
    assert error_line(text) == f"UnappliedWrite: {line}"


@pytest.mark.parametrize(
    "text",
    [
        "No space left on device",
        "[in table ] cannot apply ingest record seq= (x)",
        "in table t1: cannot apply ingest seq=4",
        "",
    ],
)
def test_text_that_is_not_ours_names_nothing(text: str) -> None:
    assert failed_table(text) is None
    assert unapplied_records(text) is None
    assert unapplied_failure(text, 0) is None
