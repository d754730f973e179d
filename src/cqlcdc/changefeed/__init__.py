"""YDB-style changefeeds: options, record serializers (JSON, Debezium, DynamoDB Streams) and
the partitioner that spreads records over a topic's partitions by primary key.

Pure Python on top of ``cqlcdc.cdc`` row events; ``pipeline`` writes the records to topics.
"""

from __future__ import annotations

from cqlcdc.changefeed.options import FeedOptions, feed_options_from_texts, parse_feed_options
from cqlcdc.changefeed.partitioner import partition_for, primary_key_bytes
from cqlcdc.changefeed.records import FeedRecord, barrier_record, encode, feed_records
from cqlcdc.changefeed.values import to_attribute_value, to_json

__all__ = [
    "FeedOptions",
    "FeedRecord",
    "barrier_record",
    "encode",
    "feed_options_from_texts",
    "feed_records",
    "parse_feed_options",
    "partition_for",
    "primary_key_bytes",
    "to_attribute_value",
    "to_json",
]
