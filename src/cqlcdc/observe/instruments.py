"""The process's metrics registry and the metrics updated as work happens.

Names follow ScyllaDB's where it exports the same measure (``scylla_transport_*`` of its
CQL server) and carry a ``cqlcdc_`` prefix elsewhere. Labels are bounded: opcodes, result
classes, statement kinds, table and feed names of the catalog; never a key or a stream.
What is cheaper to read than to count (the ingest backlog, the committed seq, consumer
offsets) is read at scrape time by collectors (``cqlcdc.server.metrics``), not kept here.

>>> REQUESTS.labels(opcode="QUERY", result="ok").inc()
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from cqlcdc.observe.cdc_operations import CdcOperationStats

REGISTRY = CollectorRegistry()
# counting happens once a metrics endpoint serves them (``cqlcdc serve --metrics``): a
# server without one pays one flag test per event
enabled = False
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory...
PlatformCollector(registry=REGISTRY)  # python_info: the interpreter's version
GCCollector(registry=REGISTRY)

# an acknowledgement ranges from a fraction of a millisecond (a read of a small table) to
# the write timeout (120 s) when the pipeline holds writes back
LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 120.0,
)  # fmt: skip
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536)
BATCH_SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
BATCH_ROWS_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)

REQUESTS = Counter(
    "cqlcdc_requests",
    "CQL requests answered, by opcode and result (ok, or the error class sent)",
    ["opcode", "result"],
    registry=REGISTRY,
)
REQUEST_LATENCY = Histogram(
    "cqlcdc_request_latency_seconds",
    "Time from a request's arrival to its answer (a write's: until it is durable, its "
    "acknowledgement), by opcode and kind (write, read, schema, prepare, use, error)",
    ["opcode", "kind"],
    buckets=LATENCY_BUCKETS_S,
    registry=REGISTRY,
)
GROUP_COMMIT = Histogram(
    "cqlcdc_group_commit_records",
    "Ingest records made durable by one append (concurrent writers share it)",
    buckets=SIZE_BUCKETS,
    registry=REGISTRY,
)
BATCH_DURATION = Histogram(
    "cqlcdc_batch_duration_seconds",
    "Wall time of one pipeline micro-batch (plan, process, commit, maintain)",
    buckets=BATCH_SECONDS_BUCKETS,
    registry=REGISTRY,
)
BATCH_ROWS = Histogram(
    "cqlcdc_batch_rows",
    "Ingest records one pipeline micro-batch applied",
    buckets=BATCH_ROWS_BUCKETS,
    registry=REGISTRY,
)
BATCH_PHASE = Counter(
    "cqlcdc_batch_phase_seconds",
    "Time micro-batches spent in each phase (plan, process, commit, maintain)",
    ["phase"],
    registry=REGISTRY,
)
COMPACTIONS = Counter(
    "cqlcdc_compaction_runs",
    "Compaction commits (small files of a bucket rewritten as one), by output kind",
    ["output"],
    registry=REGISTRY,
)
RETENTION_GAPS = Counter(
    "cqlcdc_feed_retention_gaps",
    "Reads of a changefeed that asked for offsets retention had removed (a gap notice)",
    ["feed"],
    registry=REGISTRY,
)
PIPELINE_FAILURES = Counter(
    "cqlcdc_pipeline_failures",
    "Micro-batches that failed: a table stopped (contained), or the whole pipeline",
    ["scope"],
    registry=REGISTRY,
)
PIPELINE_RETRIES = Counter(
    "cqlcdc_pipeline_retries",
    "Micro-batches retried, or streaming queries restarted, after a failure, by cause "
    "(environment: a full disk, memory; transient: Spark's machinery; data: the first "
    "failure the core blames on a table or record, retried once before it stops the table)",
    ["cause"],
    registry=REGISTRY,
)
# ScyllaDB's scylla_cdc_* operation counters (counted where writes become mutations)
CDC_OPERATIONS = CdcOperationStats()
REGISTRY.register(CDC_OPERATIONS)
