"""``cqlcdc serve --metrics``: a Prometheus endpoint that moves as the work does.

Writes go through the real cassandra-driver, a feed is read by a ``FeedConsumer`` and
published to Kafka (the Tansu broker), and ``/metrics`` is parsed by prometheus_client's own
parser. The Grafana dashboard's every expression names a metric the server exports, and a
real Prometheus server (Debian's package) scrapes the endpoint and answers a query.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import RoundRobinPolicy
from cassandra.protocol import SyntaxException
from prometheus_client.parser import text_string_to_metric_families

import cqlcdc
from cqlcdc.feed_reader import FeedConsumer
from cqlcdc.publish.publisher import PublishConfig, publish
from cqlcdc.server import CqlServer
from cqlcdc.server.metrics import MetricsEndpoint, parse_metrics_address
from tests.e2e.kafka_broker import tansu

pytestmark = pytest.mark.spark

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "cqlcdc.json"
KS = "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"  # noqa: E501
# every label the endpoint may carry: none names a key, a stream or a partition
BOUNDED_LABELS = {
    "opcode", "result", "kind", "le", "phase", "output", "feed", "scope", "table", "topic",
    "consumer", "version", "batch", "scheduling_group_name", "split",
    "cause",  # cqlcdc_pipeline_retries: environment, transient, data
    # prometheus_client's own collectors
    "generation", "implementation", "major", "minor", "patchlevel",
}  # fmt: skip

# a read waits for the writes before it to be applied: seconds on a machine Spark shares
READ_TIMEOUT_S = 120.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def metered(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsEndpoint]:
    """A server with its metrics endpoint on free loopback ports."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("metered"), master="local[2]")
    server = CqlServer(session.coordinator, port=0)
    server.start_in_thread()
    endpoint = MetricsEndpoint.start(server, "127.0.0.1:0", "test")
    try:
        yield endpoint
    finally:
        endpoint.close()
        server.stop_thread()
        session.close()


@pytest.fixture(scope="module")
def cql(metered: MetricsEndpoint) -> Iterator[Any]:
    server = metered.collectors[0].server  # type: ignore[attr-defined]
    cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
    session = cluster.connect()
    session.execute(KS)
    yield session
    cluster.shutdown()


def scrape(endpoint: MetricsEndpoint) -> tuple[Samples, list[Any]]:
    with urllib.request.urlopen(endpoint.url, timeout=10) as response:
        text = response.read().decode()
    families = list(text_string_to_metric_families(text))
    samples: Samples = {}
    for family in families:
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, families


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_the_address_defaults_to_loopback() -> None:
    assert parse_metrics_address("9180") == ("127.0.0.1", 9180)
    assert parse_metrics_address("0.0.0.0:9180") == ("0.0.0.0", 9180)
    assert parse_metrics_address("[::1]:9180") == ("::1", 9180)
    with pytest.raises(ValueError, match="HOST:PORT or PORT"):
        parse_metrics_address("localhost:http")


def test_counters_and_lag_move_with_the_work(
    metered: MetricsEndpoint, cql: Any, tmp_path: Path
) -> None:
    cql.execute("CREATE TABLE ks.m (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    cql.execute("ALTER TABLE ks.m ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')")
    before, _ = scrape(metered)
    insert = cql.prepare("INSERT INTO ks.m (pk, v) VALUES (?, ?)")
    results = execute_concurrent_with_args(cql, insert, [(i, i) for i in range(300)], 32)
    assert all(ok for ok, _ in results)
    count = cql.execute("SELECT count(*) FROM ks.m", timeout=READ_TIMEOUT_S)  # waits: applied
    assert count.one().count == 300
    with pytest.raises(SyntaxException):
        cql.execute("SELEC nothing")
    after, _ = scrape(metered)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("cqlcdc_requests_total", opcode="EXECUTE", result="ok") >= 300
    assert moved("cqlcdc_requests_total", opcode="QUERY", result="CqlSyntaxError") == 1
    assert moved("cqlcdc_request_latency_seconds_count", opcode="EXECUTE", kind="void") >= 300
    assert moved("scylla_transport_cql_requests_count", kind="EXECUTE") >= 300
    assert moved("scylla_transport_requests_served") >= 302
    assert value(after, "scylla_transport_current_connections") >= 1
    # concurrent writes share appends (the combiner's bulk chunks hold several writes a
    # record): fewer appends than writes, each of at least one record
    appends = moved("cqlcdc_group_commit_records_count")
    assert 0 < appends < 300
    assert appends <= moved("cqlcdc_group_commit_records_sum") <= 300
    assert (
        value(after, "cqlcdc_pipeline_committed_seq")
        >= value(before, "cqlcdc_pipeline_committed_seq") + 300
    )
    assert value(after, "cqlcdc_pipeline_running") == 1
    assert value(after, "cqlcdc_table_stopped", table="ks.m") == 0
    for output in ("base", "log", "feed"):
        assert value(after, "cqlcdc_table_commits_total", table="ks.m", output=output) >= 1
    assert value(after, "cqlcdc_feed_records_total", feed="ks.m/f") == 300

    # a consumer group's lag: the records after its committed offsets
    data_dir = metered.collectors[1].coordinator.data_dir  # type: ignore[attr-defined]
    consumer = FeedConsumer(data_dir, "ks.m/f", "billing")
    consumer.poll(max_records=100)
    consumer.commit()
    samples, _ = scrape(metered)
    lag = "cqlcdc_feed_consumer_lag_records"
    assert value(samples, lag, feed="ks.m/f", consumer="billing") == 200
    while consumer.poll():
        pass
    consumer.commit()
    samples, _ = scrape(metered)
    assert value(samples, lag, feed="ks.m/f", consumer="billing") == 0

    # a Kafka publisher's lag: what it has not published; it moves with new writes
    with tansu(tmp_path / "tansu.log") as broker:
        config = PublishConfig(data_dir, "ks.m/f", broker.bootstrap, "m-updates", progress_s=0)
        assert publish(config, progress=open("/dev/null", "w")).records == 300  # noqa: SIM115
        samples, _ = scrape(metered)
        publish_lag = "cqlcdc_feed_publish_lag_records"
        assert value(samples, publish_lag, feed="ks.m/f", topic="m-updates") == 0
        results = execute_concurrent_with_args(cql, insert, [(i, -i) for i in range(300, 340)], 16)
        assert all(ok for ok, _ in results)
        assert cql.execute("SELECT count(*) FROM ks.m", timeout=READ_TIMEOUT_S).one().count == 340
        samples, _ = scrape(metered)
        assert value(samples, publish_lag, feed="ks.m/f", topic="m-updates") == 40
        assert value(samples, "cqlcdc_feed_publish_errors_total", feed="ks.m/f") == 0
    # a micro-batch is timed once it is maintained too, after its writes are visible: the
    # batches of the first writes are done by now (later ones ran after them)
    for name in ("cqlcdc_batch_duration_seconds_count", "cqlcdc_batch_rows_sum"):
        assert value(samples, name) > value(before, name), name


def test_label_cardinality_stays_bounded(metered: MetricsEndpoint, cql: Any) -> None:
    """Thousands of distinct keys and many statements leave the series count where it was:
    no label names a key, a stream or a statement."""
    cql.execute(
        "CREATE TABLE IF NOT EXISTS ks.wide (pk int, ck int, v text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    insert = cql.prepare("INSERT INTO ks.wide (pk, ck, v) VALUES (?, ?, ?)")
    rows = [(i % 997, i, f"v{i}") for i in range(3000)]
    assert all(ok for ok, _ in execute_concurrent_with_args(cql, insert, rows, 32))
    for i in range(20):  # distinct literal statements
        cql.execute(f"SELECT v FROM ks.wide WHERE pk = {i} AND ck = {i}")
    samples, _ = scrape(metered)
    assert len(samples) < 1000, len(samples)
    labels = {name for _, pairs in samples for name, _ in pairs}
    assert labels <= BOUNDED_LABELS, labels - BOUNDED_LABELS


def exported_names(families: list[Any]) -> set[str]:
    """Every series name the endpoint declares: its samples', and for a family without a
    sample yet (a labelled counter nothing incremented) the names its type gives it."""
    names: set[str] = set()
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
    for family in families:
        names.update(s.name for s in family.samples)
        names.update(family.name + s for s in suffixes.get(family.type, [""]))
    return names


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "le", "inf", "nan"}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside label matchers,
    ranges, strings and grouping clauses, that are not functions or keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        following = text[match.end() :].lstrip()
        if following.startswith("(") or match.group(0).lower() in _KEYWORDS:
            continue
        names.add(match.group(0))
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    assert len(exprs) >= 20
    return exprs


def test_the_metric_names_parser() -> None:
    expr = 'histogram_quantile(0.99, sum by (le) (rate(a_bucket{kind="void"}[5m]))) / b'
    assert metric_names(expr) == {"a_bucket", "b"}


def test_every_dashboard_query_names_an_exported_metric(metered: MetricsEndpoint, cql: Any) -> None:
    cql.execute("CREATE TABLE IF NOT EXISTS ks.d (pk int PRIMARY KEY, v int)")
    cql.execute("INSERT INTO ks.d (pk, v) VALUES (1, 1)")
    assert cql.execute("SELECT v FROM ks.d WHERE pk = 1", timeout=READ_TIMEOUT_S).one().v == 1
    _, families = scrape(metered)
    exported = exported_names(families)
    for expr in dashboard_exprs():
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, (expr, names - exported)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
    return body


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip(
            "no prometheus binary: `make setup` installs Debian's prometheus package with "
            "apt-get, which this machine could not do"
        )
    return found


def test_a_prometheus_server_scrapes_the_endpoint(
    metered: MetricsEndpoint, cql: Any, tmp_path: Path
) -> None:
    """Prometheus (Debian's package) scrapes the server on loopback; a query through its
    HTTP API returns what the endpoint exports, and every dashboard expression parses."""
    binary = prometheus_binary()
    cql.execute("CREATE TABLE IF NOT EXISTS ks.p (pk int PRIMARY KEY, v int)")
    insert = cql.prepare("INSERT INTO ks.p (pk, v) VALUES (?, ?)")
    assert all(ok for ok, _ in execute_concurrent_with_args(cql, insert, [(1, 1), (2, 2)], 2))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: cqlcdc\n"
        f"    static_configs:\n      - targets: ['{metered.host}:{metered.port}']\n"
    )
    port = _free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    api = f"http://127.0.0.1:{port}/api/v1/query?query="
    try:
        query = 'cqlcdc_requests_total{opcode="EXECUTE",result="ok"}'
        deadline = time.monotonic() + 60
        found: list[Any] = []
        while not found:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            with contextlib.suppress(urllib.error.URLError, ConnectionError):
                found = _get_json(api + urllib.parse.quote(query))["data"]["result"]
            if not found:
                time.sleep(0.2)  # polling Prometheus's next scrape, bounded by the deadline
        samples, _ = scrape(metered)
        scraped = value(samples, "cqlcdc_requests_total", opcode="EXECUTE", result="ok")
        assert 2 <= float(found[0]["value"][1]) <= scraped
        up = _get_json(api + urllib.parse.quote('up{job="cqlcdc"}'))["data"]["result"]
        assert up and up[0]["value"][1] == "1"
        for expr in dashboard_exprs():
            expr = expr.replace("$__rate_interval", "1m")
            answer = _get_json(api + urllib.parse.quote(expr))
            assert answer["status"] == "success", (expr, answer)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_cqlcdc_serve_with_metrics_and_json_logs(spark: Any, tmp_path: Path) -> None:
    """``cqlcdc serve --metrics PORT --log-format json``: one JSON line says it serves (with
    versions, the CQL and the metrics addresses), a DDL is one line, SIGTERM ends with the
    stop lines and exit 0, and nothing on stderr is a traceback."""
    import os
    import signal
    import sys

    cql_port, metrics_port = _free_port(), _free_port()
    cli = Path(sys.executable).with_name("cqlcdc")
    proc = subprocess.Popen(
        [
            str(cli),
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(cql_port),
            "--master",
            "local[1]",
            "--metrics",
            str(metrics_port),
            "--log-format",
            "json",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert proc.stderr is not None
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "serving" in line:
                break
        started = json.loads(lines[-1])
        assert started["level"] == "INFO" and started["logger"] == "cqlcdc.serve"
        message = started["message"]
        assert f"127.0.0.1:{cql_port}" in message
        assert f"metrics on http://127.0.0.1:{metrics_port}/metrics" in message
        assert "cqlcdc 0.1.0" in message and "pyspark" in message and "Python 3" in message
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as response:
            assert b"cqlcdc_pipeline_committed_seq" in response.read()
        cluster = Cluster(["127.0.0.1"], port=cql_port, load_balancing_policy=RoundRobinPolicy())
        try:
            session = cluster.connect()
            session.execute(KS)
        finally:
            cluster.shutdown()
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 0, rest
    records = [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
    messages = [r["message"] for r in records]
    assert "schema change: CREATED KEYSPACE ks" in messages, messages
    assert any(m.startswith("stopping:") for m in messages), messages
    assert any(m.startswith("stopped; every acknowledged write") for m in messages), messages
    assert "Traceback" not in rest


def test_a_bad_metrics_address_is_one_line(tmp_path: Path) -> None:
    """Refused before the data directory is opened: one line, no traceback."""
    import sys

    cli = Path(sys.executable).with_name("cqlcdc")
    done = subprocess.run(
        [str(cli), "serve", "--data-dir", str(tmp_path / "d"), "--metrics", "localhost:http"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "cqlcdc: InvalidRequest: --metrics takes HOST:PORT or PORT, not 'localhost:http'\n"
    )
    assert not (tmp_path / "d").exists()
