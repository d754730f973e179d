"""The broker side of publishing: client settings, the topic, the committed feed position.

The position of a publisher is the next feed offset of each partition, stored as the offset
of Kafka partition i in a consumer group (default ``cqlcdc-publish.<topic>.<feed topic id>``)
and written by ``send_offsets_to_transaction`` in the transaction that publishes the records
before it, so the broker holds records and position together: both or neither.

>>> client_config("127.0.0.1:9092", sasl_username="u", sasl_password="p")["sasl.mechanism"]
'PLAIN'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

#: Record headers every published message carries: its feed offset and feed incarnation.
OFFSET_HEADER = "cqlcdc.offset"
FEED_HEADER = "cqlcdc.feed"


class PublishError(Exception):
    """Publishing cannot go on: the broker cannot be reached within the bound, the topic is
    unusable or was deleted, a record is larger than the broker accepts, another publisher
    took over. Nothing of the failed slice is visible to ``read_committed`` consumers.

    Not a CQL error: it has no native-protocol code, and ``cqlcdc`` prints it as
    ``cqlcdc publish: <message>`` and exits 1.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BrokerUnreachable(PublishError):
    """No broker answered within the timeout: an error when publishing starts, a retried
    attempt once it runs (a broker restarting, a network partition)."""


def client_config(
    bootstrap: str,
    *,
    security_protocol: str | None = None,
    sasl_mechanism: str | None = None,
    sasl_username: str | None = None,
    sasl_password: str | None = None,
    ssl_ca: str | None = None,
    ssl_cert: str | None = None,
    ssl_key: str | None = None,
    ssl_key_password: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """librdkafka settings for the broker: the named options, then ``extra`` (raw
    ``key=value`` settings, which win).

    A SASL user without ``security_protocol`` means ``SASL_SSL`` when a TLS option is given,
    else ``SASL_PLAINTEXT``; TLS options alone mean ``SSL``. The mechanism defaults to
    ``PLAIN``.
    """
    conf: dict[str, str] = {"bootstrap.servers": bootstrap}
    tls = any(x is not None for x in (ssl_ca, ssl_cert, ssl_key))
    if security_protocol is None and sasl_username is not None:
        security_protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
    elif security_protocol is None and tls:
        security_protocol = "SSL"
    if security_protocol is not None:
        conf["security.protocol"] = security_protocol
    if sasl_username is not None:
        conf["sasl.mechanism"] = sasl_mechanism or "PLAIN"
        conf["sasl.username"] = sasl_username
        conf["sasl.password"] = sasl_password or ""
    elif sasl_mechanism is not None:
        conf["sasl.mechanism"] = sasl_mechanism
    for key, value in (
        ("ssl.ca.location", ssl_ca),
        ("ssl.certificate.location", ssl_cert),
        ("ssl.key.location", ssl_key),
        ("ssl.key.password", ssl_key_password),
    ):
        if value is not None:
            conf[key] = value
    conf.update(extra or {})
    return conf


def parse_config_pairs(pairs: list[str] | None) -> dict[str, str]:
    """``["key=value", ...]`` (repeated ``--kafka-config``) as a dict.

    Raises:
        PublishError: a pair without ``=``.
    """
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PublishError(f"--kafka-config takes key=value, not {pair!r}")
        out[key.strip()] = value
    return out


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` inside a ``KafkaException`` (None for anything else)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def describe(exc: BaseException) -> str:
    err = kafka_error(exc)
    return f"{err.name()}: {err.str()}" if err is not None else f"{type(exc).__name__}: {exc}"


class Broker:
    """An admin client and a (never joining) consumer of the group that holds the position.

    Consumer-group joins are not needed: the group's offsets are read with OffsetFetch and
    written by the producer's transactions.
    """

    def __init__(self, conf: Mapping[str, str], group: str, timeout_s: float) -> None:
        self.conf = dict(conf)
        self.group = group
        self.timeout_s = timeout_s
        self.bootstrap = self.conf["bootstrap.servers"]
        self.admin = AdminClient(dict(self.conf))
        self.consumer = Consumer(
            {
                **self.conf,
                "group.id": group,
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
            }
        )

    def close(self) -> None:
        self.consumer.close()

    def unreachable(self, exc: BaseException) -> BrokerUnreachable:
        return BrokerUnreachable(
            f"cannot reach the Kafka broker at {self.bootstrap} within {self.timeout_s:g} s "
            f"({describe(exc)})"
        )

    def topic_info(self, topic: str) -> tuple[str, int] | None:
        """The topic's id and partition count, None when it does not exist (DescribeTopics:
        unlike a metadata request it never makes the topic on brokers that auto-create).

        Raises:
            PublishError: no broker answered within the timeout.
        """
        futures = self.admin.describe_topics(
            TopicCollection([topic]), request_timeout=self.timeout_s
        )
        try:
            found = futures[topic].result()
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_TOPIC,
            ):
                return None
            if err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise PublishError(f"not allowed to describe Kafka topic {topic}") from e
            raise self.unreachable(e) from e
        return str(found.topic_id), len(found.partitions)

    def ensure_topic(
        self, topic: str, partitions: int, feed: str, replication: int
    ) -> tuple[str, bool]:
        """Create the topic with ``partitions`` partitions, or check the existing one has at
        least as many. Returns the topic id and whether it was created.

        Raises:
            PublishError: the topic has fewer partitions, or cannot be created.
        """
        info = self.topic_info(topic)
        created = False
        if info is None:
            futures = self.admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
                request_timeout=self.timeout_s,
            )
            try:
                futures[topic].result()
                created = True
            except KafkaException as e:
                err = kafka_error(e)
                if err is None or err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise PublishError(f"cannot create Kafka topic {topic}: {describe(e)}") from e
            info = self.topic_info(topic)
            if info is None:
                raise PublishError(f"Kafka topic {topic} was created but the broker lacks it")
        topic_id, count = info
        if count < partitions:
            raise PublishError(
                f"Kafka topic {topic} has {count} partition(s), fewer than the {partitions} of "
                f"changefeed {feed}: feed partition i is published to Kafka partition i, so the "
                f"topic needs at least {partitions} (add partitions, or publish to another topic)"
            )
        return topic_id, created

    def positions(self, topic: str, partitions: int) -> dict[int, int]:
        """The next feed offset of each partition, as committed in the group (0 if none)."""
        asked = [TopicPartition(topic, p) for p in range(partitions)]
        try:
            got = self.consumer.committed(asked, timeout=self.timeout_s)
        except KafkaException as e:
            raise self.unreachable(e) from e
        out = {p: 0 for p in range(partitions)}
        for tp in got:
            if tp.error is not None:
                raise PublishError(
                    f"cannot read the position of group {self.group} for {topic}/{tp.partition}: "
                    f"{tp.error.str()}"
                )
            out[tp.partition] = max(int(tp.offset), 0)
        return out

    def high_watermark(self, topic: str, partition: int) -> int:
        try:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
            )
        except KafkaException as e:
            raise self.unreachable(e) from e
        return int(high)

    def group_metadata(self) -> Any:
        return self.consumer.consumer_group_metadata()
