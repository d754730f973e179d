"""``cqlcdc serve --metrics HOST:PORT``: the Prometheus endpoint of a running server.

Requests are counted as they are answered (``note_request``, by the connection); the rest is
read at scrape time from the server, the coordinator and the engine (``ServerCollector``,
``PipelineCollector``): the ingest backlog, the committed batch, tables and their commits,
stopped tables, feeds and their consumers' lag. Reading costs nothing between scrapes and
cannot drift from the state it reports. ScyllaDB's names where it has the same measure
(``scylla_transport_*``: its CQL server's), ``cqlcdc_*`` elsewhere.

>>> endpoint = MetricsEndpoint.start(server, "127.0.0.1:9180")  # doctest: +SKIP
>>> endpoint.close()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cqlcdc.directory_state import ingest_backlog, read_state
from cqlcdc.errors import CqlError
from cqlcdc.observe import instruments
from cqlcdc.observe.instruments import REGISTRY, REQUEST_LATENCY, REQUESTS
from cqlcdc.server.error_responses import ErrorResponse
from cqlcdc.server.frames import Opcode

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from cqlcdc.coordinator import Coordinator
    from cqlcdc.server.contracts import Node, Transport
    from cqlcdc.server.results import SchemaChange

log = logging.getLogger("cqlcdc.server")

DEFAULT_HOST = "127.0.0.1"
# ScyllaDB labels its per-kind request counts with the service level's scheduling group;
# every request here runs in the one default level
SCHEDULING_GROUP = "sl:default"
_RESPONSE_KINDS = {
    "VoidResult": "void",
    "RowsResult": "rows",
    "EncodedRowsResult": "rows",
    "SchemaChangeResult": "schema_change",
    "PreparedResult": "prepared",
    "SetKeyspaceResult": "set_keyspace",
    "Ready": "ready",
    "Supported": "supported",
    "Authenticate": "authenticate",
    "AuthSuccess": "auth_success",
}


# the counter and histogram of each (opcode, result, kind): bounded like the labels
_CHILDREN: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def opcode_name(opcode: int) -> str:
    """The request's kind as ScyllaDB names it (``QUERY``, ``EXECUTE``...)."""
    try:
        return Opcode(opcode).name
    except ValueError:
        return "UNKNOWN"


def note_request(server: Transport, opcode: str, outcome: object, started: float) -> None:
    """Count an answered request: by opcode and result (``ok`` or the error's class), and
    its latency by opcode and the kind of answer (``void``: a write's acknowledgement)."""
    server.requests_served += 1
    if not instruments.enabled:
        return
    if isinstance(outcome, CqlError):
        result, kind = outcome.class_name, "error"
    elif isinstance(outcome, ErrorResponse):
        cls = CqlError.by_code.get(outcome.code)
        result, kind = (cls.__name__ if cls is not None else "ServerError"), "error"
    else:
        result, kind = "ok", _RESPONSE_KINDS.get(type(outcome).__name__, "other")
    key = (opcode, result, kind)
    children = _CHILDREN.get(key)
    if children is None:  # labels() takes a lock and builds a key: once per label set
        children = _CHILDREN[key] = (
            REQUESTS.labels(opcode=opcode, result=result),
            REQUEST_LATENCY.labels(opcode=opcode, kind=kind),
        )
    children[0].inc()
    children[1].observe(time.perf_counter() - started)


def log_schema_change(change: SchemaChange, role: str | None) -> None:
    """One line per DDL statement applied (who, what)."""
    name = f"{change.keyspace}.{change.name}" if change.name else change.keyspace
    by = f" by {role}" if role else ""
    log.info("schema change: %s %s %s%s", change.change_type, change.target, name, by)


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (then 127.0.0.1: this machine only).

    Raises:
        ValueError: not an address with a port in 0..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_HOST, text
    host = host.strip("[]") or DEFAULT_HOST
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--metrics takes HOST:PORT or PORT, not {text!r}")
    return host, int(port_text)


def _untyped(name: str, doc: str, samples: list[tuple[dict[str, str], float]]) -> Metric:
    """A metric named exactly as ScyllaDB names it: a counter without the ``_total``
    suffix prometheus_client would add (exposed untyped, as ScyllaDB's name says)."""
    metric = Metric(name, doc, "unknown")
    for labels, value in samples:
        metric.add_sample(name, labels, value)
    return metric


class ServerCollector(Collector):
    """The CQL server's connections and requests, as ScyllaDB's transport reports them."""

    def __init__(self, server: Node) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        server = self.server
        yield GaugeMetricFamily(
            "scylla_transport_current_connections",
            "Holds a current number of client connections.",
            value=server.connection_count(),
        )
        yield GaugeMetricFamily(
            "scylla_transport_requests_serving",
            "Holds a number of requests that are being processed right now.",
            value=server.requests_serving,
        )
        yield _untyped(
            "scylla_transport_requests_served",
            "Counts a number of served requests.",
            [({}, server.requests_served)],
        )
        yield _untyped(
            "scylla_transport_cql_connections",
            "Counts a number of client connections.",
            [({}, server.connects)],
        )
        yield _untyped(
            "scylla_transport_cql_requests_count",
            "Counts the total number of CQL messages of a specific kind.",
            [
                ({"kind": kind, "scheduling_group_name": SCHEDULING_GROUP}, count)
                for kind, count in sorted(dict(server.requests_by_kind).items())
            ],
        )


class PipelineCollector(Collector):
    """The engine's progress and the data directory's tables and feeds, read when scraped."""

    def __init__(self, coordinator: Coordinator, version: str) -> None:
        self.coordinator = coordinator
        self.version = version

    def collect(self) -> Iterator[Metric]:
        coord = self.coordinator
        engine = coord.engine
        manifest = engine.snapshot().manifest
        local = coord.data_dir.path if coord.data_dir.is_local else None
        state = read_state(local, coord.catalog, manifest, engine.stopped)
        durable, files_behind = ingest_backlog(coord.ingest.files(), state.committed_seq)
        info = GaugeMetricFamily("cqlcdc_info", "The cqlcdc version serving", labels=["version"])
        info.add_metric([self.version], 1)
        yield info
        yield GaugeMetricFamily(
            "cqlcdc_ingest_durable_seq",
            "The last ingest seq durable in the ingest log (acknowledged writes)",
            value=durable,
        )
        yield GaugeMetricFamily(
            "cqlcdc_pipeline_committed_seq",
            "Every ingest seq up to this one is applied and committed in every output",
            value=state.committed_seq,
        )
        yield GaugeMetricFamily(
            "cqlcdc_pipeline_backlog_seqs",
            "Ingest seqs durable but not yet applied by the pipeline",
            value=max(durable - state.committed_seq, 0),
        )
        yield GaugeMetricFamily(
            "cqlcdc_pipeline_backlog_files",
            "Ingest files holding records the pipeline has not applied yet",
            value=files_behind,
        )
        yield GaugeMetricFamily(
            "cqlcdc_pipeline_batch_id",
            "The last micro-batch committed in every output",
            value=state.batch_id,
        )
        query = engine.query
        running = query is not None and query.isActive and state.failure is None
        yield GaugeMetricFamily(
            "cqlcdc_pipeline_running",
            "1 while the streaming query runs and has stopped at no record",
            value=1 if running else 0,
        )
        failed = GaugeMetricFamily(
            "cqlcdc_pipeline_stopped_seq",
            "The first ingest seq of the record the whole pipeline stopped at (absent: none)",
            labels=["batch"],
        )
        if state.failure is not None:
            failed.add_metric([str(state.failure.batch_id)], state.failure.first_seq)
        yield failed
        commits = CounterMetricFamily(
            "cqlcdc_table_commits",
            "Delta commits of a table's outputs (base, log, feed), compactions included",
            labels=["table", "output"],
        )
        stopped = GaugeMetricFamily(
            "cqlcdc_table_stopped",
            "1 for a table the pipeline stopped (its writes are held), else 0",
            labels=["table"],
        )
        stopped_seq = GaugeMetricFamily(
            "cqlcdc_table_stopped_seq",
            "The ingest seq of the write a stopped table stopped at",
            labels=["table"],
        )
        for table in state.tables:
            for kind, count in sorted(table.commits.items()):
                commits.add_metric([table.name, kind], count)
            stopped.add_metric([table.name], 1 if table.stopped is not None else 0)
            if table.stopped is not None:
                stopped_seq.add_metric([table.name], table.stopped.first_seq)
        yield commits
        yield stopped
        yield stopped_seq
        records = CounterMetricFamily(
            "cqlcdc_feed_records",
            "Records a changefeed took (retention removes old ones; offsets never repeat)",
            labels=["feed"],
        )
        lag = GaugeMetricFamily(
            "cqlcdc_feed_consumer_lag_records",
            "Records of a feed after a consumer group's committed offsets (all partitions)",
            labels=["feed", "consumer"],
        )
        committed = GaugeMetricFamily(
            "cqlcdc_feed_consumer_committed_records",
            "Records of a feed a consumer group committed (all partitions)",
            labels=["feed", "consumer"],
        )
        publish_lag = GaugeMetricFamily(
            "cqlcdc_feed_publish_lag_records",
            "Records of a feed not yet published to its Kafka topic (as its publisher last "
            "recorded its position)",
            labels=["feed", "topic"],
        )
        publish_errors = CounterMetricFamily(
            "cqlcdc_feed_publish_errors",
            "Failed attempts to publish a feed to Kafka (each retried) in its publisher's run",
            labels=["feed", "topic"],
        )
        publish_updated = GaugeMetricFamily(
            "cqlcdc_feed_publish_updated_timestamp_seconds",
            "When a feed's publisher last recorded its position (a stale one has stopped)",
            labels=["feed", "topic"],
        )
        for feed in state.feeds:
            records.add_metric([feed.name], feed.records)
            for consumer in feed.consumers:
                lag.add_metric([feed.name, consumer.group], consumer.lag)
                committed.add_metric([feed.name, consumer.group], consumer.committed)
            for publisher in feed.publishers:
                labels = [feed.name, publisher.topic]
                publish_lag.add_metric(labels, publisher.lag)
                publish_errors.add_metric(labels, publisher.errors)
                publish_updated.add_metric(labels, publisher.updated_s)
        yield records
        yield lag
        yield committed
        yield publish_lag
        yield publish_errors
        yield publish_updated


class MetricsEndpoint:
    """The ``/metrics`` HTTP endpoint of one server, and the collectors it registered."""

    def __init__(self, httpd: WSGIServer, collectors: list[Collector]) -> None:
        self.httpd = httpd
        self.collectors = collectors
        host, port = httpd.server_address[:2]
        self.host = host.decode() if isinstance(host, bytes) else str(host)
        self.port = int(port)

    @classmethod
    def start(cls, server: Node, address: str, version: str = "") -> MetricsEndpoint:
        """Serve ``/metrics`` on ``address`` (``HOST:PORT`` or ``PORT``; port 0: any).

        Raises:
            ValueError: a malformed address.
            OSError: the address cannot be bound.
        """
        host, port = parse_metrics_address(address)
        collectors: list[Collector] = [
            ServerCollector(server),
            PipelineCollector(server.coordinator, version),
        ]
        for collector in collectors:
            REGISTRY.register(collector)
        try:
            httpd, _ = start_http_server(port, host, registry=REGISTRY)
        except BaseException:
            for collector in collectors:
                REGISTRY.unregister(collector)
            raise
        instruments.enabled = True
        return cls(httpd, collectors)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and unregister the collectors (a server in a test's process)."""
        self.httpd.shutdown()
        self.httpd.server_close()
        for collector in self.collectors:
            REGISTRY.unregister(collector)
