"""The publishing loop: read a slice of the feed, publish it in one Kafka transaction together
with the new position, repeat (with ``follow``, until asked to stop).

Exactly once: a slice's records and the group offsets that say "published up to here" commit
in one transaction, so a ``read_committed`` consumer sees each record once whatever kills the
publisher. A restarted publisher (or one recovering from a failed slice) first aborts what its
predecessor left open (``init_transactions`` fences it), then reads the position back from the
broker: a transaction whose commit outcome was unknown is never published twice.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from cqlcdc.directory_state import save_publish_state
from cqlcdc.feed_reader import FeedReader
from cqlcdc.location import Location
from cqlcdc.publish.kafka_client import (
    FEED_HEADER,
    OFFSET_HEADER,
    Broker,
    BrokerUnreachable,
    PublishError,
    describe,
    kafka_error,
)

_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE}
_NO_TOPIC = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_ID,
}


@dataclass(frozen=True)
class PublishConfig:
    """What to publish where.

    Attributes:
        data_dir: the data directory holding the feed.
        feed: ``"keyspace.table/feed"``.
        bootstrap: the broker(s), ``HOST:PORT[,HOST:PORT...]``.
        topic: the Kafka topic (created with the feed's partition count when missing).
        follow: keep publishing new records until ``Publisher.request_stop``.
        client: more librdkafka settings (security, ``--kafka-config`` pairs).
        group: the consumer group holding the position (default
            ``cqlcdc-publish.<topic>.<feed topic id>``, one per feed incarnation).
        transactional_id: the producer's (default: the group's name); one publisher per id.
        slice_records: records per transaction (split evenly over the partitions).
        timeout_s: the bound on each broker operation (reaching it, a flush, a commit).
        retries: failed slices in a row retried before giving up.
        poll_s: how often ``follow`` looks for new records.
        replication_factor: of a created topic (-1: the broker's default).
        progress_s: seconds between progress lines (0: none but the last).
    """

    data_dir: Location | str | os.PathLike[str]
    feed: str
    bootstrap: str
    topic: str
    follow: bool = False
    client: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None
    transactional_id: str | None = None
    slice_records: int = 20_000
    timeout_s: float = 30.0
    retries: int = 5
    poll_s: float = 0.2
    replication_factor: int = -1
    progress_s: float = 2.0


@dataclass
class PublishResult:
    """What a run published: ``records`` in ``transactions``, and the final ``positions``
    (next feed offset per partition, as committed on the broker)."""

    records: int
    transactions: int
    seconds: float
    positions: dict[int, int]
    stopped: bool = False

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


class _Attempt(Exception):
    """A slice failed in a way a retry can cure (broker unreachable, timed out, aborted)."""


class Publisher:
    """Publishes one feed to one Kafka topic; ``run()`` once per instance."""

    def __init__(self, config: PublishConfig, *, progress: TextIO | None = None) -> None:
        """Find the feed.

        Raises:
            InvalidRequest: an unknown table or changefeed, a malformed name.
        """
        self.config = config
        self.reader = FeedReader(config.data_dir, config.feed)
        self.partitions = self.reader.partitions
        # the default group names the feed incarnation (its topic id): a feed dropped and
        # added again starts at offset 0 with new records, which a position of the old one
        # would silently skip
        incarnation = self.reader.output.rsplit("/", 1)[-1]
        self.group = config.group or f"cqlcdc-publish.{config.topic}.{incarnation}"
        self.transactional_id = config.transactional_id or self.group
        self.feed_id = f"{config.feed}@{self.reader.output}".encode()
        self.progress = progress if progress is not None else sys.stderr
        self.stop_requested = False
        # librdkafka logs each failed connection attempt; failures reach the user as errors
        # (raise it with --kafka-config log_level=6 to see the client's own log)
        self.conf: dict[str, str] = {
            "log_level": "0",
            "bootstrap.servers": config.bootstrap,
            **config.client,
        }
        self._errors: list[tuple[KafkaError, int, int, int]] = []
        # failed attempts of this run, for ``cqlcdc status`` and the server's metrics
        self.failed_attempts = 0
        self.last_error = ""
        self._producer: Any = None
        self.topic_id = ""
        self._checked_at = 0.0

    def request_stop(self) -> None:
        """Finish the open transaction, then return from ``run`` (a signal handler's call)."""
        self.stop_requested = True

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> PublishResult:
        """Publish every record not yet published (with ``follow``, until stopped).

        Raises:
            PublishError: see its docstring; the records before the failing slice stay
                published and a rerun continues after them.
        """
        cfg = self.config
        start = time.monotonic()
        broker = Broker(self.conf, self.group, cfg.timeout_s)
        try:
            self.topic_id, created = broker.ensure_topic(
                cfg.topic, self.partitions, cfg.feed, cfg.replication_factor
            )
            if created:
                self._say(f"created Kafka topic {cfg.topic} with {self.partitions} partition(s)")
            self._producer = self._new_producer()
            positions = self._positions(broker)
            self._record(positions)
            resumed = sum(positions.values())
            if resumed:
                self._say(
                    f"resuming after {resumed:,} records published earlier (group {self.group})"
                )
            targets = None if cfg.follow else self.reader.next_offsets()
            records = transactions = failures = 0
            last_note = start
            recovering = False
            while not self.stop_requested:
                try:
                    if recovering:
                        positions = self._recover(broker)
                        recovering = False
                    available = self.reader.next_offsets()
                    limit = available if targets is None else targets
                    batch = self._read_slice(positions, limit)
                    if not batch:
                        if targets is not None:
                            break
                        self._check_current()
                        time.sleep(cfg.poll_s)
                        continue
                    done = self._transaction(broker, batch)
                except (_Attempt, BrokerUnreachable) as e:
                    failures += 1
                    reason = e.message if isinstance(e, BrokerUnreachable) else str(e)
                    self._record(positions, reason)
                    if failures > cfg.retries:
                        raise PublishError(
                            f"gave up after {failures} failed attempts to publish to "
                            f"{cfg.topic} at {cfg.bootstrap}: {reason}"
                        ) from e
                    self._say(
                        f"attempt {failures} of {cfg.retries + 1} failed ({reason}); retrying"
                    )
                    time.sleep(min(0.5 * 2 ** (failures - 1), 5.0))
                    recovering = True
                    continue
                failures = 0
                transactions += 1
                positions.update(done)
                self._record(positions)
                records = sum(positions.values()) - resumed  # with commits of unknown outcome
                now = time.monotonic()
                if cfg.progress_s and now - last_note >= cfg.progress_s:
                    self._report(records, now - start, positions, available)
                    last_note = now
            seconds = time.monotonic() - start
            self._report(records, seconds, positions, self.reader.next_offsets(), final=True)
            return PublishResult(records, transactions, seconds, positions, self.stop_requested)
        finally:
            broker.close()
            if self._producer is not None:
                self._producer.flush(0)

    def _check_current(self) -> None:
        """Following, stop with an error once the feed incarnation is gone (its topic gets no
        more records): waiting on it forever would look like an idle feed."""
        now = time.monotonic()
        if now - self._checked_at < 1.0:
            return
        self._checked_at = now
        if not self.reader.is_current():
            raise PublishError(
                f"changefeed {self.config.feed} was dropped (or its table or keyspace) while "
                f"publishing; every record it had is published. A feed added again is a new "
                f"topic: publish it with a new run"
            )

    def _read_slice(
        self, positions: Mapping[int, int], limit: Mapping[int, int]
    ) -> dict[int, list[tuple[int, str | None, str]]]:
        """The next records of every partition behind ``limit``, at most ``slice_records``
        in all, checked dense from each position on (retention never skips silently)."""
        behind = [p for p in range(self.partitions) if positions[p] < limit[p]]
        if not behind:
            return {}
        per = max(1, self.config.slice_records // len(behind))
        ranges = {p: (positions[p], min(limit[p], positions[p] + per) - 1) for p in behind}
        out = self.reader.raw_ranges(ranges)
        for p, rows in out.items():
            first = positions[p]
            got = rows[0][0] if rows else None
            if got != first or rows[-1][0] != first + len(rows) - 1:
                lost = f"{first}..{got - 1}" if got is not None else f"{first} on"
                raise PublishError(
                    f"records {lost} of partition {p} of {self.config.feed} were removed by its "
                    f"RETENTION_PERIOD before they were published; they cannot be published "
                    f"(nothing is skipped silently): publish the rest to a new topic or group"
                )
        return out

    # -- one transaction --------------------------------------------------------------------

    def _transaction(
        self, broker: Broker, batch: Mapping[int, list[tuple[int, str | None, str]]]
    ) -> dict[int, int]:
        cfg = self.config
        producer = self._producer
        self._errors.clear()
        feed_header = (FEED_HEADER, self.feed_id)
        try:
            producer.begin_transaction()
            for p, rows in batch.items():
                for offset, key, value in rows:
                    headers = [(OFFSET_HEADER, str(offset).encode()), feed_header]
                    data = value.encode()
                    while True:
                        try:
                            producer.produce(
                                cfg.topic,
                                value=data,
                                key=None if key is None else key.encode(),
                                partition=p,
                                headers=headers,
                            )
                            break
                        except BufferError:  # the local queue is full: let it drain
                            producer.poll(0.05)
                        except KafkaException as e:
                            err = kafka_error(e)
                            if err is not None and err.code() in _TOO_LARGE:
                                self._abort_quietly()
                                raise self._too_large(p, offset, len(data), err) from e
                            raise
            left = producer.flush(cfg.timeout_s)
            if self._errors:
                self._delivery_failed(broker)
            if left:
                raise _Attempt(f"{left:,} records not acknowledged within {cfg.timeout_s:g} s")
            offsets = [TopicPartition(cfg.topic, p, rows[-1][0] + 1) for p, rows in batch.items()]
            producer.send_offsets_to_transaction(offsets, broker.group_metadata(), cfg.timeout_s)
            self._commit()
            self._check_topic(broker)  # a broker may take records for a deleted topic
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() in _FENCED:
                raise self._fenced(err) from e
            if err is not None and err.fatal():
                raise PublishError(f"the Kafka producer failed: {describe(e)}") from e
            if err is not None and err.code() in _NO_TOPIC:
                self._check_topic(broker)
            raise _Attempt(describe(e)) from e
        return {p: rows[-1][0] + 1 for p, rows in batch.items()}

    def _commit(self) -> None:
        """commit_transaction, retried while the error says a retry may succeed."""
        for _ in range(3):
            try:
                self._producer.commit_transaction(self.config.timeout_s)
                return
            except KafkaException as e:
                err = kafka_error(e)
                if err is None or not err.retriable() or err.txn_requires_abort():
                    raise
        self._producer.commit_transaction(self.config.timeout_s)

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            offset = dict(msg.headers() or []).get(OFFSET_HEADER, b"-1")
            self._errors.append((err, msg.partition(), int(offset), len(msg.value() or b"")))

    def _delivery_failed(self, broker: Broker) -> None:
        err, partition, offset, size = self._errors[0]
        if err.code() in _TOO_LARGE:
            self._abort_quietly()
            raise self._too_large(partition, offset, size, err)
        if err.code() in _FENCED:
            raise self._fenced(err)
        if err.code() in _NO_TOPIC:
            self._check_topic(broker)
        raise _Attempt(
            f"{len(self._errors):,} records failed, the first: {err.name()}: {err.str()}"
        )

    # -- failures -----------------------------------------------------------------------------

    def _recover(self, broker: Broker) -> dict[int, int]:
        """After a failed slice: abort what is open (a new producer if that fails, whose
        init_transactions aborts it), then take the position from the broker."""
        try:
            if self._producer is None:
                raise _Attempt("no producer")
            self._producer.abort_transaction(self.config.timeout_s)
        except (KafkaException, _Attempt):
            if self._producer is not None:
                self._producer.purge()
            self._producer = None
            self._producer = self._new_producer()
        self._check_topic(broker)
        return self._positions(broker)

    def _abort_quietly(self) -> None:
        try:
            self._producer.abort_transaction(self.config.timeout_s)
        except KafkaException:
            self._producer.purge()

    def _check_topic(self, broker: Broker) -> None:
        """Raises PublishError when the topic is gone or is another one of the same name."""
        info = broker.topic_info(self.config.topic)
        if info is None or info[0] != self.topic_id:
            raise PublishError(
                f"Kafka topic {self.config.topic} was deleted while publishing (records "
                f"published before, and maybe those of the last transaction, went with it); "
                f"publish to a new topic, or use a new --group to publish from offset 0"
            )

    def _too_large(self, partition: int, offset: int, size: int, err: KafkaError) -> PublishError:
        return PublishError(
            f"record {offset} of partition {partition} of {self.config.feed} ({size:,} bytes) "
            f"is larger than the broker accepts ({err.str()}); nothing of its transaction was "
            f"published and it is not skipped: raise the producer's message.max.bytes "
            f"(--kafka-config message.max.bytes=N) and the topic's max.message.bytes"
        )

    def _fenced(self, err: KafkaError) -> PublishError:
        return PublishError(
            f"another publisher with transactional id {self.transactional_id} took over "
            f"({err.str()}); this one stopped without publishing its open transaction"
        )

    def _new_producer(self) -> Any:
        cfg = self.config
        timeout_ms = str(int(cfg.timeout_s * 1000))
        producer = Producer(
            {
                "linger.ms": "20",
                "batch.num.messages": "10000",
                "queue.buffering.max.messages": "200000",
                **self.conf,
                "transactional.id": self.transactional_id,
                "enable.idempotence": "true",
                "allow.auto.create.topics": "false",
                "message.timeout.ms": timeout_ms,
                "transaction.timeout.ms": str(max(60_000, 2 * int(cfg.timeout_s * 1000))),
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
            }
        )
        try:
            producer.init_transactions(cfg.timeout_s)
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() in _FENCED:
                raise self._fenced(err) from e
            raise BrokerUnreachable(
                f"cannot start a transactional producer on {cfg.bootstrap} within "
                f"{cfg.timeout_s:g} s ({describe(e)})"
            ) from e
        return producer

    def _positions(self, broker: Broker) -> dict[int, int]:
        """The committed position, checked against the feed and the topic."""
        positions = broker.positions(self.config.topic, self.partitions)
        available = self.reader.next_offsets()
        for p, at in positions.items():
            if at > available[p]:
                raise PublishError(
                    f"group {self.group} says {at:,} records of partition {p} were published, "
                    f"but {self.config.feed} has {available[p]:,}: the group belongs to another "
                    f"feed (or an earlier incarnation of it); use another --group or --topic"
                )
            if at and broker.high_watermark(self.config.topic, p) == 0:
                raise PublishError(
                    f"Kafka partition {p} of {self.config.topic} is empty but group "
                    f"{self.group} says {at:,} records were published to it: the topic was "
                    f"deleted and made again; use a new --group to publish from offset 0"
                )
        return positions

    # -- progress -----------------------------------------------------------------------------

    def _record(self, positions: Mapping[int, int], error: str | None = None) -> None:
        """Leave the position (and a failed attempt) where ``cqlcdc status`` and the
        server's metrics read it: ``publishers/<feed topic>/<group>.json``."""
        if error is not None:
            self.failed_attempts += 1
            self.last_error = error
        save_publish_state(
            self.reader.data_dir,
            self.reader.output,
            self.group.replace("/", "_"),
            self.config.topic,
            dict(positions),
            self.failed_attempts,
            self.last_error,
        )

    def _report(
        self,
        records: int,
        seconds: float,
        positions: Mapping[int, int],
        available: Mapping[int, int],
        *,
        final: bool = False,
    ) -> None:
        lag = {p: max(available[p] - positions[p], 0) for p in range(self.partitions)}
        if self.partitions <= 16:
            lags = " ".join(f"{p}:{n:,}" for p, n in lag.items())
        else:
            worst = sorted(lag.items(), key=lambda kv: -kv[1])[:8]
            lags = f"total {sum(lag.values()):,}, largest " + " ".join(
                f"{p}:{n:,}" for p, n in worst
            )
        rate = records / seconds if seconds > 0 else 0.0
        what = "published" if final else "publishing:"
        self._say(
            f"{what} {records:,} records to {self.config.topic} in {seconds:.1f} s "
            f"({rate:,.0f} records/s); lag per partition {lags}"
        )

    def _say(self, text: str) -> None:
        print(f"cqlcdc publish: {text}", file=self.progress, flush=True)


def publish(config: PublishConfig, *, progress: TextIO | None = None) -> PublishResult:
    """Publish ``config.feed`` to ``config.topic`` (see ``Publisher.run``)."""
    return Publisher(config, progress=progress).run()
