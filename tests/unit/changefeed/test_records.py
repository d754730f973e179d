"""Changefeed records, every MODE x FORMAT, against the YDB reference's shapes
(ydb-changefeed-reference.md sections 3-5; YDB's change_record_cdc_serializer.cpp)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cqlcdc.changefeed import FeedOptions, barrier_record, encode, feed_records
from cqlcdc.changefeed.events import RowEvent
from cqlcdc.changefeed.options import FORMATS, MODES
from cqlcdc.changefeed.partitioner import partition_for, primary_key_bytes
from cqlcdc.changefeed.records import CONNECTOR, CONNECTOR_VERSION, sequence_number
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.token import serialize_partition_key
from cqlcdc.types import MapValue, UdtValue

STEP = 1670792400890
TX = 562949953607163
PK = (5,)
ADDR = UdtValue(("street", "zip"), ("Main St", 10115))
ROW1 = {
    "v": "x",
    "n": 1,
    "b": b"\x01\x02",
    "m": MapValue({"a": 1}),
    "st": frozenset({2, 1}),
    "l": ("p",),
    "a": ADDR,
}
ROW2 = {**ROW1, "v": "y", "m": MapValue({"a": 1, "b": 2})}
INSERT = RowEvent(("a",), "upsert", None, ROW1, dict(ROW1), inserted=True)
UPDATE = RowEvent(("a",), "upsert", ROW1, ROW2, {"v": "y", "m": MapValue({"a": 1, "b": 2})})
DELETE = RowEvent(("a",), "erase", ROW2, None, {})

KEY = [5, "a"]
# YDB images: every non-key column (sorted by name), never the key columns
N1 = {
    "a": {"street": "Main St", "zip": 10115},
    "b": "AQI=",
    "l": ["p"],
    "m": {"a": 1},
    "n": 1,
    "st": [1, 2],
    "v": "x",
}
N2 = {**N1, "m": {"a": 1, "b": 2}, "v": "y"}
DEBEZIUM_KEY = {"pk": 5, "ck": "a"}
DYNAMO_KEYS = {"pk": {"N": "5"}, "ck": {"S": "a"}}
D1 = {
    "a": {"M": {"street": {"S": "Main St"}, "zip": {"N": "10115"}}},
    "b": {"B": "AQI="},
    "l": {"L": [{"S": "p"}]},
    "m": {"M": {"a": {"N": "1"}}},
    "n": {"N": "1"},
    "st": {"NS": ["1", "2"]},
    "v": {"S": "x"},
    **DYNAMO_KEYS,
}
D2 = {**D1, "m": {"M": {"a": {"N": "1"}, "b": {"N": "2"}}}, "v": {"S": "y"}}


def run(feed: FeedOptions, table: TableSchema, *events: RowEvent) -> list[dict[str, Any]]:
    """Each event as its own write at step STEP + i, transaction TX."""
    out = []
    for i, event in enumerate(events):
        records = feed_records(feed, table, PK, [event], STEP + i, TX)
        assert len(records) == 1
        out.append(records[0].value)
    return out


# -- YDB JSON ---------------------------------------------------------------------------------

JSON_GOLDEN: dict[str, list[dict[str, Any]]] = {
    "KEYS_ONLY": [
        {"key": KEY, "update": {}},
        {"key": KEY, "update": {}},
        {"key": KEY, "erase": {}},
    ],
    "UPDATES": [
        {"key": KEY, "update": N1},
        {"key": KEY, "update": {"m": {"a": 1, "b": 2}, "v": "y"}},
        {"key": KEY, "erase": {}},
    ],
    "NEW_IMAGE": [
        {"key": KEY, "update": {}, "newImage": N1},
        {"key": KEY, "update": {}, "newImage": N2},
        {"key": KEY, "erase": {}},
    ],
    "OLD_IMAGE": [
        {"key": KEY, "update": {}},
        {"key": KEY, "update": {}, "oldImage": N1},
        {"key": KEY, "erase": {}, "oldImage": N2},
    ],
    "NEW_AND_OLD_IMAGES": [
        {"key": KEY, "update": {}, "newImage": N1},
        {"key": KEY, "update": {}, "newImage": N2, "oldImage": N1},
        {"key": KEY, "erase": {}, "oldImage": N2},
    ],
}


@pytest.mark.parametrize("mode", MODES)
def test_json_golden(table: TableSchema, mode: str) -> None:
    feed = FeedOptions(mode, "JSON")  # type: ignore[arg-type]
    assert run(feed, table, INSERT, UPDATE, DELETE) == JSON_GOLDEN[mode]


def test_json_virtual_timestamps(table: TableSchema) -> None:
    feed = FeedOptions("UPDATES", "JSON", virtual_timestamps=True)
    [record] = feed_records(feed, table, PK, [DELETE], STEP, TX)
    assert record.value == {"key": KEY, "erase": {}, "ts": [STEP, TX]}
    assert record.key == KEY


def test_json_column_delete_shows_null(table: TableSchema) -> None:
    # UPDATE ks.t SET v = null: the written column with null, like YDB's null cell
    event = RowEvent(("a",), "upsert", ROW1, {**ROW1, "v": None}, {"v": None})
    assert run(FeedOptions("UPDATES", "JSON"), table, event) == [
        {"key": KEY, "update": {"v": None}}
    ]
    [image] = run(FeedOptions("NEW_IMAGE", "JSON"), table, event)
    assert image["newImage"]["v"] is None


def test_json_collection_update_shows_resulting_value(table: TableSchema) -> None:
    # UPDATE ks.t SET st = st + {3}, l = l + ['q']: the columns' values after the write
    new = {**ROW1, "st": frozenset({1, 2, 3}), "l": ("p", "q")}
    event = RowEvent(("a",), "upsert", ROW1, new, {"st": new["st"], "l": new["l"]})
    assert run(FeedOptions("UPDATES", "JSON"), table, event) == [
        {"key": KEY, "update": {"l": ["p", "q"], "st": [1, 2, 3]}}
    ]


def test_barrier_record() -> None:
    record = barrier_record(1670792500000, 0)
    assert record.value == {"resolved": [1670792500000, 0]}
    assert record.key is None and record.partition_key == b""
    assert encode(record.value) == '{"resolved":[1670792500000,0]}'


# -- Debezium ---------------------------------------------------------------------------------


def debezium(op: str, i: int, **images: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {
        **images,
        "op": op,
        "source": {
            "connector": "cqlcdc",
            "version": CONNECTOR_VERSION,
            "ts_ms": STEP + i,
            "step": STEP + i,
            "txId": TX,
            "snapshot": False,
        },
    }
    return {"payload": payload}


BEFORE1, BEFORE2 = {**N1, **DEBEZIUM_KEY}, {**N2, **DEBEZIUM_KEY}
DEBEZIUM_GOLDEN: dict[str, list[dict[str, Any]]] = {
    "KEYS_ONLY": [debezium("u", 0), debezium("u", 1), debezium("d", 2)],
    "UPDATES": [debezium("u", 0), debezium("u", 1), debezium("d", 2)],
    "NEW_IMAGE": [
        debezium("u", 0, after=BEFORE1),
        debezium("u", 1, after=BEFORE2),
        debezium("d", 2),
    ],
    "OLD_IMAGE": [
        debezium("u", 0),
        debezium("u", 1, before=BEFORE1),
        debezium("d", 2, before=BEFORE2),
    ],
    "NEW_AND_OLD_IMAGES": [
        debezium("c", 0, after=BEFORE1),
        debezium("u", 1, before=BEFORE1, after=BEFORE2),
        debezium("d", 2, before=BEFORE2),
    ],
}


@pytest.mark.parametrize("mode", MODES)
def test_debezium_golden(table: TableSchema, mode: str) -> None:
    feed = FeedOptions(mode, "DEBEZIUM_JSON")  # type: ignore[arg-type]
    assert run(feed, table, INSERT, UPDATE, DELETE) == DEBEZIUM_GOLDEN[mode]


def test_debezium_message_key_and_no_null_images(table: TableSchema) -> None:
    feed = FeedOptions("NEW_IMAGE", "DEBEZIUM_JSON")
    [record] = feed_records(feed, table, PK, [DELETE], STEP, TX, created_ms=99)
    assert record.key == {"payload": {"pk": 5, "ck": "a"}}
    # YDB omits an absent image rather than writing null
    assert "before" not in record.value["payload"] and "after" not in record.value["payload"]
    assert record.value["payload"]["source"]["ts_ms"] == 99
    assert CONNECTOR == "cqlcdc"


# -- DynamoDB Streams ------------------------------------------------------------------------


def dynamodb(name: str, i: int, view: str, **images: dict[str, Any]) -> dict[str, Any]:
    seq = f"{TX:014d}{0:07d}"
    stream: dict[str, Any] = {
        "ApproximateCreationDateTime": STEP + i,
        "Keys": DYNAMO_KEYS,
        **images,
        "SequenceNumber": seq,
        "StreamViewType": view,
    }
    return {
        "awsRegion": "eu-west-1",
        "dynamodb": stream,
        "eventID": f"3-{seq}",
        "eventName": name,
        "eventSource": "cqlcdc:table",
        "eventVersion": "1.0",
    }


DYNAMODB_GOLDEN: dict[str, list[dict[str, Any]]] = {
    "KEYS_ONLY": [
        dynamodb("MODIFY", 0, "KEYS_ONLY"),
        dynamodb("MODIFY", 1, "KEYS_ONLY"),
        dynamodb("REMOVE", 2, "KEYS_ONLY"),
    ],
    # no UPDATES view in DynamoDB: YDB's default branch makes it KEYS_ONLY
    "UPDATES": [
        dynamodb("MODIFY", 0, "KEYS_ONLY"),
        dynamodb("MODIFY", 1, "KEYS_ONLY"),
        dynamodb("REMOVE", 2, "KEYS_ONLY"),
    ],
    "NEW_IMAGE": [
        dynamodb("MODIFY", 0, "NEW_IMAGE", NewImage=D1),
        dynamodb("MODIFY", 1, "NEW_IMAGE", NewImage=D2),
        dynamodb("REMOVE", 2, "NEW_IMAGE"),
    ],
    "OLD_IMAGE": [
        dynamodb("MODIFY", 0, "OLD_IMAGE"),
        dynamodb("MODIFY", 1, "OLD_IMAGE", OldImage=D1),
        dynamodb("REMOVE", 2, "OLD_IMAGE", OldImage=D2),
    ],
    "NEW_AND_OLD_IMAGES": [
        dynamodb("INSERT", 0, "NEW_AND_OLD_IMAGES", NewImage=D1),
        dynamodb("MODIFY", 1, "NEW_AND_OLD_IMAGES", NewImage=D2, OldImage=D1),
        dynamodb("REMOVE", 2, "NEW_AND_OLD_IMAGES", OldImage=D2),
    ],
}


@pytest.mark.parametrize("mode", MODES)
def test_dynamodb_golden(table: TableSchema, mode: str) -> None:
    feed = FeedOptions(
        mode,  # type: ignore[arg-type]
        "DYNAMODB_STREAMS_JSON",
        aws_region="eu-west-1",
        partitions=4,
    )
    assert partition_for(primary_key_bytes(table, PK, ("a",)), 4) == 3
    assert run(feed, table, INSERT, UPDATE, DELETE) == DYNAMODB_GOLDEN[mode]


def test_dynamodb_null_columns_are_left_out(table: TableSchema) -> None:
    event = RowEvent(("a",), "upsert", None, {"v": "x"}, {"v": "x"})
    [value] = run(FeedOptions("NEW_IMAGE", "DYNAMODB_STREAMS_JSON"), table, event)
    assert value["dynamodb"]["NewImage"] == {"v": {"S": "x"}, **DYNAMO_KEYS}


def test_sequence_numbers_are_unique_ordered_digit_strings(table: TableSchema) -> None:
    feed = FeedOptions("KEYS_ONLY", "DYNAMODB_STREAMS_JSON")
    events = [RowEvent((c,), "erase", {"v": c}, None, {}) for c in "abc"]
    first = feed_records(feed, table, PK, events, STEP, TX)
    later = feed_records(feed, table, PK, events[:1], STEP, TX + 1)
    seqs = [r.value["dynamodb"]["SequenceNumber"] for r in first + later]
    assert all(s.isdigit() and 21 <= len(s) <= 40 for s in seqs)  # AWS: 21 to 40 digits
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert seqs[0] == "562949953607163" + "0000000"
    again = feed_records(feed, table, PK, events, STEP, TX, first_index=3)
    assert again[0].value["dynamodb"]["SequenceNumber"].endswith("0000003")


def test_sequence_number_bounds() -> None:
    assert sequence_number(0, 0, 0) == "0" * 21  # YDB's 21 digits
    assert sequence_number(0, 42, 3) == "00000000000042" + "0000003"
    with pytest.raises(ValueError, match="tx_id"):
        sequence_number(1, 1 << 64, 0)
    with pytest.raises(ValueError, match="index"):
        sequence_number(0, 0, 10**7)


# -- row kinds: static rows, range and partition deletes, TTL expiry, initial scan ------------


def test_static_row_record_has_the_partition_key_only(table: TableSchema) -> None:
    event = RowEvent(None, "upsert", {"s": 1}, {"s": 2}, {"s": 2})
    [json_rec] = feed_records(FeedOptions("NEW_AND_OLD_IMAGES", "JSON"), table, PK, [event], 1, 2)
    assert json_rec.value == {
        "key": [5],
        "update": {},
        "newImage": {"s": 2},
        "oldImage": {"s": 1},
    }
    assert json_rec.partition_key == serialize_partition_key(table, PK)
    [deb] = feed_records(FeedOptions("NEW_IMAGE", "DEBEZIUM_JSON"), table, PK, [event], 1, 2)
    assert deb.key == {"payload": {"pk": 5}}
    assert deb.value["payload"]["after"] == {"s": 2, "pk": 5}
    [ddb] = feed_records(
        FeedOptions("OLD_IMAGE", "DYNAMODB_STREAMS_JSON"), table, PK, [event], 1, 2
    )
    assert ddb.key == {"pk": {"N": "5"}}
    assert ddb.value["dynamodb"]["OldImage"] == {"s": {"N": "1"}, "pk": {"N": "5"}}


def test_partition_delete_gives_one_erase_per_deleted_row(table: TableSchema) -> None:
    # DELETE FROM ks.t WHERE pk = 5 on a partition with a static row and rows a, b
    events = [
        RowEvent(None, "erase", {"s": 1}, None, {}),
        RowEvent(("a",), "erase", {"v": "x"}, None, {}),
        RowEvent(("b",), "erase", {"v": "y"}, None, {}),
    ]
    records = feed_records(FeedOptions("UPDATES", "JSON"), table, PK, events, 1, 2)
    assert [r.value for r in records] == [
        {"key": [5], "erase": {}},
        {"key": [5, "a"], "erase": {}},
        {"key": [5, "b"], "erase": {}},
    ]


def test_range_delete_gives_one_record_per_row_in_every_format(table: TableSchema) -> None:
    # DELETE FROM ks.t WHERE pk = 5 AND ck >= 'a' AND ck < 'c' removing rows a and b
    events = [RowEvent((c,), "erase", {"v": c}, None, {}) for c in "ab"]
    for fmt in FORMATS:
        feed = FeedOptions("OLD_IMAGE", fmt)
        records = feed_records(feed, table, PK, events, 1, 2)
        assert len(records) == 2
        assert [r.partition_key for r in records] == [
            primary_key_bytes(table, PK, (c,)) for c in "ab"
        ]


def test_ttl_expiry_is_dropped_unless_enabled(table: TableSchema) -> None:
    expired = RowEvent(("a",), "erase", {"v": "x"}, None, {}, expired=True)
    for fmt in FORMATS:
        assert feed_records(FeedOptions("KEYS_ONLY", fmt), table, PK, [expired], 1, 2) == []


def test_ttl_expiry_marks(table: TableSchema) -> None:
    expired = RowEvent(("a",), "erase", {"v": "x"}, None, {}, expired=True)

    def one(fmt: str) -> dict[str, Any]:
        feed = FeedOptions("KEYS_ONLY", fmt, ttl_expiry_events=True)  # type: ignore[arg-type]
        [record] = feed_records(feed, table, PK, [expired], 1, 2)
        return record.value

    assert one("JSON") == {"key": KEY, "erase": {}, "expired": True}
    deb = one("DEBEZIUM_JSON")["payload"]
    assert deb["op"] == "d" and deb["source"]["expired"] is True
    ddb = one("DYNAMODB_STREAMS_JSON")
    assert ddb["eventName"] == "REMOVE"
    assert ddb["userIdentity"] == {"principalId": "dynamodb.amazonaws.com", "type": "Service"}


SCAN = RowEvent(("a",), "upsert", None, ROW1, {})


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("KEYS_ONLY", {"key": KEY, "update": {}}),
        ("UPDATES", {"key": KEY, "update": N1}),
        ("NEW_IMAGE", {"key": KEY, "update": {}, "newImage": N1}),
        ("OLD_IMAGE", {"key": KEY, "update": {}, "oldImage": N1}),  # YDB's scan does this
        ("NEW_AND_OLD_IMAGES", {"key": KEY, "update": {}, "newImage": N1}),
    ],
)
def test_initial_scan_json_is_an_update(
    table: TableSchema, mode: str, expected: dict[str, Any]
) -> None:
    feed = FeedOptions(mode, "JSON")  # type: ignore[arg-type]
    [record] = feed_records(feed, table, PK, [SCAN], 1, 2, snapshot=True)
    assert record.value == expected


def test_initial_scan_debezium_and_dynamodb(table: TableSchema) -> None:
    feed = FeedOptions("NEW_AND_OLD_IMAGES", "DEBEZIUM_JSON")
    [deb] = feed_records(feed, table, PK, [SCAN], 1, 2, snapshot=True)
    assert deb.value["payload"]["op"] == "r"
    assert deb.value["payload"]["source"]["snapshot"] is True
    assert deb.value["payload"]["after"] == BEFORE1 and "before" not in deb.value["payload"]
    feed = FeedOptions("NEW_AND_OLD_IMAGES", "DYNAMODB_STREAMS_JSON")
    [ddb] = feed_records(feed, table, PK, [SCAN], 1, 2, snapshot=True)
    assert ddb.value["eventName"] == "INSERT"
    assert ddb.value["dynamodb"]["NewImage"] == D1


def test_initial_scan_rejects_erase(table: TableSchema) -> None:
    with pytest.raises(ValueError, match="initial-scan"):
        feed_records(FeedOptions("KEYS_ONLY", "JSON"), table, PK, [DELETE], 1, 2, snapshot=True)


def test_records_encode_as_compact_json(table: TableSchema) -> None:
    [record] = feed_records(FeedOptions("NEW_IMAGE", "JSON"), table, PK, [INSERT], 1, 2)
    text = encode(record.value)
    assert " " not in text.replace("Main St", "")
    assert json.loads(text) == record.value
