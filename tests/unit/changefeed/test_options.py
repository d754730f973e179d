"""``ADD CHANGEFEED`` options: YDB's defaults and limits, clear errors, catalog round trip."""

from __future__ import annotations

import pytest

from cqlcdc.changefeed.options import (
    DEFAULT_RETENTION_MS,
    MAX_RETENTION_MS,
    FeedOptions,
    feed_options_from_texts,
    iso_duration,
    parse_feed_options,
    parse_iso_duration_ms,
    to_texts,
)
from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest

from .conftest import DDL, make_table


def parse(options: str) -> FeedOptions:
    stmt = parse_statement(f"ALTER TABLE ks.t ADD CHANGEFEED f WITH ({options})")
    assert isinstance(stmt, ast.AlterTable) and isinstance(stmt.action, ast.AddChangefeed)
    return parse_feed_options(stmt.action)


def test_defaults() -> None:
    assert parse("MODE = 'UPDATES', FORMAT = 'JSON'") == FeedOptions(
        mode="UPDATES",
        format="JSON",
        virtual_timestamps=False,
        barriers_interval_ms=None,
        retention_ms=86_400_000,
        partitions=1,
        initial_scan=False,
        aws_region=None,  # the server's default applies (with_aws_region)
        ttl_expiry_events=False,
    )


def test_every_option() -> None:
    feed = parse(
        "MODE = 'NEW_AND_OLD_IMAGES', FORMAT = 'DYNAMODB_STREAMS_JSON', "
        "VIRTUAL_TIMESTAMPS = TRUE, RETENTION_PERIOD = Interval('PT72H'), "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 4, INITIAL_SCAN = true, AWS_REGION = 'eu-west-1', "
        "EXPIRY_EVENTS = true"
    )
    assert feed == FeedOptions(
        "NEW_AND_OLD_IMAGES",
        "DYNAMODB_STREAMS_JSON",
        virtual_timestamps=True,
        retention_ms=3 * 86_400_000,
        partitions=4,
        initial_scan=True,
        aws_region="eu-west-1",
        ttl_expiry_events=True,
    )
    assert feed.ttl_expiry_events


def test_barriers_and_case_insensitive_values() -> None:
    # YDB's own tests write FORMAT = "json"
    feed = parse("mode = 'keys_only', format = 'json', BARRIERS_INTERVAL = Interval('PT1S')")
    assert (feed.mode, feed.format, feed.barriers_interval_ms) == ("KEYS_ONLY", "JSON", 1000)


def test_retention_limit_is_30_days() -> None:
    assert parse("MODE = 'UPDATES', FORMAT = 'JSON', RETENTION_PERIOD = Interval('P30D')")
    assert MAX_RETENTION_MS == 30 * DEFAULT_RETENTION_MS


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("FORMAT = 'JSON'", "Changefeed MODE is required"),
        ("MODE = 'UPDATES'", "Changefeed FORMAT is required"),
        ("MODE = 'ALL', FORMAT = 'JSON'", "Invalid changefeed MODE 'ALL'"),
        ("MODE = 'UPDATES', FORMAT = 'AVRO'", "Invalid changefeed FORMAT 'AVRO'"),
        ("MODE = 1, FORMAT = 'JSON'", "Literal of String type is expected for MODE, got 1"),
        ("MODE = 'UPDATES', FORMAT = 'JSON', FOO = 1", "Unknown changefeed setting: FOO"),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', TOPIC_AUTO_PARTITIONING = 'ENABLED'",
            "Changefeed setting TOPIC_AUTO_PARTITIONING is not supported",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', VIRTUAL_TIMESTAMPS = 'yes'",
            "Literal of Bool type is expected for VIRTUAL_TIMESTAMPS, got 'yes'",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', INITIAL_SCAN = 1",
            "Literal of Bool type is expected for INITIAL_SCAN, got 1",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', RETENTION_PERIOD = 'PT1H'",
            "Literal of Interval type is expected for RETENTION_PERIOD, got 'PT1H'",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', RETENTION_PERIOD = Interval('P31D')",
            "Invalid RETENTION_PERIOD interval('P31D'): the maximum is 30 days",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', RETENTION_PERIOD = Interval('P1M')",
            "Invalid RETENTION_PERIOD Interval('P1M'): expected an ISO-8601 duration",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', BARRIERS_INTERVAL = Interval('PT0S')",
            "Invalid BARRIERS_INTERVAL Interval('PT0S'): must be at least 1 millisecond",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'DEBEZIUM_JSON', BARRIERS_INTERVAL = Interval('PT1S')",
            "BARRIERS_INTERVAL is only supported with FORMAT = 'JSON', not 'DEBEZIUM_JSON'",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', TOPIC_MIN_ACTIVE_PARTITIONS = 0",
            "Invalid TOPIC_MIN_ACTIVE_PARTITIONS 0: must be between 1 and 1024",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', TOPIC_MIN_ACTIVE_PARTITIONS = '4'",
            "Literal of integer type is expected for TOPIC_MIN_ACTIVE_PARTITIONS, got '4'",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'JSON', AWS_REGION = 'eu-west-1'",
            "AWS_REGION is only supported with FORMAT = 'DYNAMODB_STREAMS_JSON', not 'JSON'",
        ),
        (
            "MODE = 'UPDATES', FORMAT = 'DYNAMODB_STREAMS_JSON', AWS_REGION = true",
            "Literal of String type is expected for AWS_REGION, got true",
        ),
    ],
)
def test_errors_name_the_option_and_value(options: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse(options)
    assert message in info.value.message


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1S", 1000),
        ("PT24H", 86_400_000),
        ("P1DT12H", 129_600_000),
        ("P2W", 14 * 86_400_000),
        ("PT0.5S", 500),
        ("PT1M30S", 90_000),
        ("pt10s", 10_000),
        ("P", None),
        ("PT", None),
        ("P1DT", None),
        ("P1Y", None),
        ("-PT1S", None),
        ("1h", None),
    ],
)
def test_iso_durations(text: str, ms: int | None) -> None:
    assert parse_iso_duration_ms(text) == ms


def test_iso_duration_text() -> None:
    assert [iso_duration(ms) for ms in (0, 1000, 1500, 90_000, 86_400_000, 129_600_000)] == [
        "PT0S",
        "PT1S",
        "PT1.5S",
        "PT1M30S",
        "P1D",
        "P1DT12H",
    ]


def test_round_trip_through_the_catalog() -> None:
    table = make_table(
        DDL[2],
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'OLD_IMAGE', FORMAT = 'JSON', "
        "VIRTUAL_TIMESTAMPS = TRUE, BARRIERS_INTERVAL = Interval('PT1S'), "
        "RETENTION_PERIOD = Interval('PT12H'), TOPIC_MIN_ACTIVE_PARTITIONS = 8, "
        "INITIAL_SCAN = TRUE, EXPIRY_EVENTS = TRUE)",
    )
    [(name, texts)] = table.changefeeds
    feed = feed_options_from_texts(texts)
    assert name == "f"
    assert feed == FeedOptions(
        "OLD_IMAGE",
        "JSON",
        virtual_timestamps=True,
        barriers_interval_ms=1000,
        retention_ms=43_200_000,
        partitions=8,
        initial_scan=True,
        ttl_expiry_events=True,
    )
    assert feed_options_from_texts(to_texts(feed)) == feed


@pytest.mark.parametrize(
    "feed",
    [
        FeedOptions("KEYS_ONLY", "JSON"),
        FeedOptions("NEW_IMAGE", "DEBEZIUM_JSON", retention_ms=1500, initial_scan=True),
        FeedOptions("NEW_AND_OLD_IMAGES", "DYNAMODB_STREAMS_JSON", aws_region="it's-1"),
    ],
)
def test_to_texts_round_trip(feed: FeedOptions) -> None:
    assert feed_options_from_texts(to_texts(feed)) == feed


def test_to_texts_leaves_defaults_out() -> None:
    assert to_texts(FeedOptions("UPDATES", "JSON")) == (
        ("MODE", "'UPDATES'"),
        ("FORMAT", "'JSON'"),
    )


def test_bad_stored_text() -> None:
    with pytest.raises(InvalidRequest, match="Invalid changefeed option text"):
        feed_options_from_texts((("MODE", "'UPDATES"),))
