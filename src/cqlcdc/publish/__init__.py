"""Publishing changefeeds to a Kafka-API broker, exactly once (``cqlcdc changefeed publish``).

Partition i of a feed goes to Kafka partition i, each record's key and value as the message
key and value, one Kafka transaction per slice with the feed position (the next feed offset
per partition) committed in the same transaction as the offsets of a consumer group.

>>> publish(PublishConfig("DATA", "ks.t/f", "127.0.0.1:9092", "orders"))  # doctest: +SKIP
"""

from __future__ import annotations

from cqlcdc.publish.kafka_client import PublishError, client_config
from cqlcdc.publish.publisher import PublishConfig, Publisher, PublishResult, publish

__all__ = [
    "PublishConfig",
    "PublishError",
    "PublishResult",
    "Publisher",
    "client_config",
    "publish",
]
