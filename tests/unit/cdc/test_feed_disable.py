"""``ALTER TABLE t ALTER CHANGEFEED f DISABLE`` (YQL) without Spark: the state is kept in the
catalog and shown by DESCRIBE, the feed stays readable (``table_feeds``) but takes no records
on any write path, and YDB's rules hold (no second DISABLE, no ENABLE, no SET)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cqlcdc.cdc.columnar import images_are_columnar, log_is_columnar
from cqlcdc.cdc.feeds import active_feeds, table_feeds
from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.cql import ast, parse_statement, render
from cqlcdc.datadir.records import records_to_arrow
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.describe import describe_statement

from .test_feed_incarnations import ADD, KS, NoState, record, run, staged, topic

DISABLE = "ALTER TABLE ks.t ALTER CHANGEFEED f DISABLE"


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    run(cat, KS, "CREATE TABLE ks.t (pk int PRIMARY KEY, v int)")
    return cat


def test_the_statement_parses_and_renders_back() -> None:
    stmt = parse_statement(DISABLE)
    assert stmt == ast.AlterTable(ast.QualifiedName("ks", "t"), ast.DisableChangefeed("f"))
    assert render(stmt) == DISABLE
    # a column named "changefeed" is still a column
    column = parse_statement("ALTER TABLE ks.t ALTER changefeed TYPE int")
    assert isinstance(column, ast.AlterTable)
    assert isinstance(column.action, ast.AlterColumnType)


def test_no_enable_and_no_set_as_in_ydb() -> None:
    # YQL: changefeed_alter_settings is DISABLE | SET (...), and every SET is refused
    with pytest.raises(InvalidRequest, match=r"^MODE alter is not supported$"):
        parse_statement("ALTER TABLE ks.t ALTER CHANGEFEED f SET (MODE = 'UPDATES')")
    with pytest.raises(CqlSyntaxError):
        parse_statement("ALTER TABLE ks.t ALTER CHANGEFEED f ENABLE")


def test_the_state_is_kept_and_described(cat: Catalog, tmp_path: Path) -> None:
    made = run(cat, ADD)
    disabled = run(cat, DISABLE)
    assert disabled.disabled_feeds == ("f",)
    assert disabled.schema_version == made.schema_version + 1
    # still a feed of the table (its topic is read), same incarnation, but takes no records
    (feed,) = table_feeds(disabled)
    assert feed.disabled and feed.topic == topic(made)
    assert active_feeds(disabled) == []
    # saved: another process sees it
    assert run(Catalog(DocumentDirectory.of(tmp_path))).disabled_feeds == ("f",)
    table = ast.QualifiedName("ks", "t")
    text = describe_statement(
        Catalog(DocumentDirectory.of(tmp_path)), ast.Describe("TABLE", table), None
    )
    assert (
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON');\n"
        "ALTER TABLE ks.t ALTER CHANGEFEED f DISABLE;"
    ) in text


def test_ydb_refuses_what_cannot_be_disabled(cat: Catalog) -> None:
    with pytest.raises(InvalidRequest, match=r"Changefeed f does not exist in table ks\.t"):
        run(cat, DISABLE)
    run(cat, ADD, DISABLE)
    with pytest.raises(InvalidRequest, match="from Disabled to Disabled"):
        run(cat, DISABLE)


def test_drop_ends_it_and_a_new_feed_of_the_name_takes_records(cat: Catalog) -> None:
    old = run(cat, ADD, DISABLE)
    dropped = run(cat, "ALTER TABLE ks.t DROP CHANGEFEED f")
    assert dropped.disabled_feeds == () and dropped.changefeeds == ()
    again = run(cat, ADD)
    (feed,) = active_feeds(again)
    assert feed.topic != topic(old)


def test_writes_after_disable_give_no_records(cat: Catalog, tmp_path: Path) -> None:
    """The row path: the bucket's feeds are the active ones; the base table takes every
    write."""
    enabled = run(cat, ADD)
    processor = CoreProcessor(DocumentDirectory.of(tmp_path), cat)
    (group,) = processor.bucket_groups(records_to_arrow([record(enabled, 1, 1, 10)]))
    out = processor.process_bucket(group, NoState())
    assert staged(out) == {f"{enabled.table_id}/{topic(enabled)}": [{"v": 10}]}
    disabled = run(cat, DISABLE)
    (group,) = processor.bucket_groups(
        records_to_arrow([record(disabled, 2, 1, 11), record(disabled, 3, 2, 20)])
    )
    out = processor.process_bucket(group, NoState())
    assert staged(out) == {}
    assert out[f"base/{disabled.table_id}"]["seq"].to_pylist() == [2, 3]


def test_the_bulk_paths_see_no_feed(cat: Catalog) -> None:
    """Bulk writes: with only disabled feeds, a table's log is built column-wise as if it
    had none (``log_is_columnar``), so no feed record can be made there either."""
    enabled = run(cat, ADD)
    assert not log_is_columnar(enabled) and images_are_columnar(enabled)
    disabled = run(cat, DISABLE)
    assert log_is_columnar(disabled) and not images_are_columnar(disabled)
