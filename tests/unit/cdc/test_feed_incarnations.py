"""Changefeed incarnations without Spark: each ADD CHANGEFEED is a topic of its own (YDB drops
a feed's topic with the feed), kept in the catalog, and a write goes only to the incarnations
its own schema version had."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cqlcdc.cdc.feeds import STAGE_PREFIX, stage_output, table_feeds
from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.cql import ast, parse_statement
from cqlcdc.datadir.records import IngestRecord, records_to_arrow
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema import persist
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.codec import WritePayload, encode_payload
from cqlcdc.storage.mutations import WriteContext, build_insert, write_key_bytes
from cqlcdc.storage.token import murmur3_token

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
ADD = "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')"
DROP = "ALTER TABLE ks.t DROP CHANGEFEED f"


def run(cat: Catalog, *statements: str) -> TableSchema:
    for text in statements:
        cat.execute(parse_statement(text), None)
    table = cat.table("ks", "t")
    assert table is not None
    return table


def topic(table: TableSchema, name: str = "f") -> str:
    (feed,) = [f for f in table_feeds(table) if f.name == name]
    return feed.topic


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    run(cat, KS, "CREATE TABLE ks.t (pk int PRIMARY KEY, v int)")
    return cat


def test_each_add_is_a_new_topic_kept_by_later_versions(cat: Catalog, tmp_path: Path) -> None:
    first = run(cat, ADD)
    assert topic(first).startswith("f.") and len(topic(first)) == len("f.") + 12
    altered = run(cat, "ALTER TABLE ks.t ADD w int")
    assert topic(altered) == topic(first)  # an ALTER of something else keeps the topic
    dropped = run(cat, DROP)
    assert dropped.changefeeds == () and dropped.feed_topics == ()
    again = run(cat, ADD)
    assert topic(again) not in (topic(first), "f")
    # the topic id is saved with the feed: a reloaded catalog (another process) agrees
    assert topic(run(Catalog(DocumentDirectory.of(tmp_path)))) == topic(again)
    old = Catalog(DocumentDirectory.of(tmp_path)).table_by_id(again.table_id, first.schema_version)
    assert old is not None and topic(old) == topic(first)


def test_a_table_made_again_is_new_feeds_too(cat: Catalog) -> None:
    first = run(cat, ADD)
    again = run(cat, "DROP TABLE ks.t", "CREATE TABLE ks.t (pk int PRIMARY KEY, v int)", ADD)
    assert again.table_id != first.table_id
    assert stage_output(again.table_id, topic(again)) != stage_output(first.table_id, topic(first))
    made = run(cat, "DROP KEYSPACE ks", KS, "CREATE TABLE ks.t (pk int PRIMARY KEY, v int)", ADD)
    assert made.table_id not in (first.table_id, again.table_id)


def test_a_feed_saved_without_a_topic_id_keeps_its_name(cat: Catalog, tmp_path: Path) -> None:
    """Data directories from before topic ids: the topic stays ``feed/<table_id>/<name>``."""
    table = run(cat, ADD)
    data = persist.table_to_json(table)
    del data["feed_topics"]
    legacy = persist.table_from_json(data)
    assert legacy.feed_topics == () and topic(legacy) == "f"
    # the whole saved catalog, as an older cqlcdc wrote it
    path = tmp_path / persist.CATALOG_FILE
    path.write_text(path.read_text().replace('"feed_topics"', '"_unknown"'))
    reloaded = run(Catalog(DocumentDirectory.of(tmp_path)))
    assert topic(reloaded) == "f"
    # dropped and added again, it gets a topic id of its own
    assert topic(run(Catalog(DocumentDirectory.of(tmp_path)), DROP, ADD)) not in ("f", topic(table))


class NoState:
    """A ``StateReader`` of an empty table: nothing was committed before."""

    def read(
        self,
        output: str,
        bucket: int,
        pks: Sequence[bytes] | pa.Array,
        columns: list[str] | None = None,
        tokens: Sequence[int] | pa.Array | None = None,
    ) -> pa.Table:
        return pa.table({})


def record(table: TableSchema, seq: int, pk: int, v: int) -> IngestRecord:
    """The ingest record of ``INSERT INTO ks.t (pk, v) VALUES (pk, v)`` made with ``table``."""
    stmt = parse_statement(f"INSERT INTO ks.t (pk, v) VALUES ({pk}, {v})")
    assert isinstance(stmt, ast.Insert)
    now_us = 1_700_000_000_000_000 + seq
    (mutation,) = build_insert(table, stmt, WriteContext(now_us, now_us, seq))
    key = write_key_bytes(table, mutation.partition)
    payload = encode_payload(WritePayload(mutation.partition, (), now_us, seq))
    return IngestRecord(
        seq, table.table_id, table.schema_version, 0, murmur3_token(key), key, payload
    )


def staged(out: dict[str, pa.Table]) -> dict[str, list[Any]]:
    return {
        name.removeprefix(STAGE_PREFIX): [json.loads(v)["update"] for v in t["value"].to_pylist()]
        for name, t in out.items()
        if name.startswith(STAGE_PREFIX)
    }


def test_a_write_goes_to_the_incarnations_of_its_own_schema_version(
    cat: Catalog, tmp_path: Path
) -> None:
    """One bucket holding writes made before DROP + ADD and after: the bucket applies them
    with its newest schema, but the older writes are not changes of the new incarnation."""
    before_feed = run(cat)
    old = run(cat, ADD)
    new = run(cat, DROP, ADD)
    records = [
        record(before_feed, 1, 1, 10),  # made before the feed existed
        record(old, 2, 1, 11),  # made for the dropped incarnation
        record(new, 3, 1, 12),
        record(old, 4, 2, 20),
        record(new, 5, 2, 21),
    ]
    processor = CoreProcessor(DocumentDirectory.of(tmp_path), cat)
    (group,) = processor.bucket_groups(records_to_arrow(records))
    out = processor.process_bucket(group, NoState())
    assert staged(out) == {f"{new.table_id}/{topic(new)}": [{"v": 12}, {"v": 21}]}
    # the base table still takes every write, in order
    assert out[f"base/{new.table_id}"]["seq"].to_pylist() == [1, 2, 3, 4, 5]
    # alone in a bucket (applied with its own schema), an old write stays in its own
    # incarnation's topic, which nothing reads since the DROP
    (group,) = processor.bucket_groups(records_to_arrow([record(old, 6, 3, 30)]))
    alone = processor.process_bucket(group, NoState())
    assert staged(alone) == {f"{new.table_id}/{topic(old)}": [{"v": 30}]}
