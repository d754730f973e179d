"""How a failure is attributed to its table, and what a stopped table keeps (no Spark)."""

from __future__ import annotations

from pathlib import Path

from cqlcdc.datadir.containment import (
    STOPPED_FILE,
    StoppedTable,
    error_line,
    failed_table,
    load_stopped,
    one_line,
    output_table_id,
    save_stopped,
    table_tag,
)

TABLE_ID = "0b7c61f2-3f1e-4c55-9d1a-6a8f1e2b9c10"


def test_a_tag_names_the_table_in_any_text() -> None:
    assert failed_table(f"cannot apply ingest records seq=3..3: boom {table_tag(TABLE_ID)}") == (
        TABLE_ID
    )
    assert failed_table(f"x {table_tag('ks.t')} y") == "ks.t"
    assert failed_table("No space left on device") is None


def test_the_error_line_of_a_spark_traceback_is_the_tagged_line_without_its_tag() -> None:
    text = (
        "Micro-batch 4 failed: An error occurred while calling o93.toArrow.\n"
        "Traceback (most recent call last):\n"
        '  File "engine.py", line 120, in run\n'
        "RuntimeError: fault injected\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        f"cqlcdc.errors.UnappliedWrite: {table_tag(TABLE_ID)} cannot apply ingest records "
        f"seq=7..9 (table id {TABLE_ID}, bucket 2): RuntimeError: fault injected\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
    )
    assert failed_table(text) == TABLE_ID
    line = error_line(text)
    assert line.startswith("cqlcdc.errors.UnappliedWrite: cannot apply ingest records seq=7..9")
    assert line.endswith("RuntimeError: fault injected")
    delta = "External error: Schema error: Invalid data type\n   0: <unknown>\n   1: main"
    assert one_line(delta) == "External error: Schema error: Invalid data type"
    assert "\n" not in error_line("a\nb" * 1000) and len(error_line("x" * 5000)) < 600


def test_outputs_name_their_table_and_shared_ones_none() -> None:
    assert output_table_id(f"base/{TABLE_ID}") == TABLE_ID
    assert output_table_id(f"feed/{TABLE_ID}/topic-1") == TABLE_ID
    assert output_table_id(f"feedstage/{TABLE_ID}/topic-1") == TABLE_ID
    for shared in ("errors", "outcomes", "held"):
        assert output_table_id(shared) is None


def test_stopped_tables_survive_a_restart(tmp_path: Path) -> None:
    entry = StoppedTable(TABLE_ID, "ks.t", 12, 3, "RuntimeError: boom")
    save_stopped(tmp_path, {TABLE_ID: entry})
    assert load_stopped(tmp_path) == {TABLE_ID: entry}
    line = entry.log_line(tmp_path)
    assert "\n" not in line and "ks.t" in line and "seq=12" in line and "boom" in line
    assert f"cqlcdc recover --data-dir {tmp_path} --retry-table ks.t" in line
    assert "is stopped" in entry.refusal(tmp_path).message
    save_stopped(tmp_path, {})
    assert not (tmp_path / STOPPED_FILE).exists() and load_stopped(tmp_path) == {}
