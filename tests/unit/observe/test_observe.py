"""The event calls and the two log formats: one line per event, a shipper's JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from cqlcdc.observe import events, instruments, logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logs.configure("json", out)
    yield out
    logging.getLogger("cqlcdc").removeHandler(handler)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_json_lines_carry_time_level_logger_and_message(stream: io.StringIO) -> None:
    events.retention_gap("ks.t/f", 2, 10, 25)
    (line,) = _lines(stream)
    assert line["level"] == "WARNING" and line["logger"] == "cqlcdc"
    assert line["message"] == (
        "changefeed ks.t/f partition 2: a read from offset 10 met a retention gap (offsets up "
        "to 24 are no longer retained)"
    )
    assert str(line["ts"]).endswith("Z")


def test_a_traceback_stays_inside_its_one_json_line(stream: io.StringIO) -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logging.getLogger("cqlcdc.server").exception("request failed")
    assert len(stream.getvalue().splitlines()) == 1
    (line,) = _lines(stream)
    assert "ValueError: bad" in str(line["exception"])


def test_text_lines_keep_the_cqlcdc_prefix() -> None:
    out = io.StringIO()
    handler = logs.configure("text", out)
    try:
        events.compacted("base/abc123", 3)
    finally:
        logging.getLogger("cqlcdc").removeHandler(handler)
    assert out.getvalue() == "cqlcdc: INFO: compacted 3 bucket(s) of base/abc123\n"


def test_configure_replaces_its_own_handler() -> None:
    first = logs.configure("text", io.StringIO())
    second = logs.configure("json", io.StringIO())
    handlers = logging.getLogger("cqlcdc").handlers
    try:
        assert first not in handlers and second in handlers
    finally:
        logging.getLogger("cqlcdc").removeHandler(second)
    with pytest.raises(ValueError, match="not one of text, json"):
        logs.configure("xml")


def _count(name: str, **labels: str) -> float:
    value = instruments.REGISTRY.get_sample_value(name, labels or None)
    return value or 0.0


def test_a_slow_batch_is_one_warning_line(
    stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(instruments, "enabled", True)
    before = _count("cqlcdc_batch_duration_seconds_count")
    fast = {"batch_id": 7.0, "rows": 10.0, "plan_s": 0.1, "process_s": 0.2, "commit_s": 0.1}
    events.batch_finished(fast)
    assert stream.getvalue() == ""
    slow = {**fast, "batch_id": 8.0, "process_s": 12.0}
    events.batch_finished(slow)
    (line,) = _lines(stream)
    assert line["message"] == (
        "slow micro-batch 8: 12.2 s for 10 records (plan 0.1 s, process 12.0 s, commit 0.1 s, "
        "maintain 0.0 s)"
    )
    assert _count("cqlcdc_batch_duration_seconds_count") == before + 2
    assert _count("cqlcdc_batch_phase_seconds_total", phase="process") >= 12.2


def test_counting_waits_for_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a metrics endpoint the frequent events cost a flag test, nothing more."""
    monkeypatch.setattr(instruments, "enabled", False)
    before = _count("cqlcdc_group_commit_records_count")
    events.group_committed(5)
    assert _count("cqlcdc_group_commit_records_count") == before
    monkeypatch.setattr(instruments, "enabled", True)
    events.group_committed(5)
    assert _count("cqlcdc_group_commit_records_count") == before + 1


def test_a_pipeline_failure_is_counted_and_logged_at_once(stream: io.StringIO) -> None:
    before = _count("cqlcdc_pipeline_failures_total", scope="pipeline")
    events.pipeline_failed(12, RuntimeError("disk\ngone"))
    (line,) = _lines(stream)
    assert line["level"] == "ERROR"
    assert line["message"] == "pipeline stopped at micro-batch 12: RuntimeError: disk gone"
    assert _count("cqlcdc_pipeline_failures_total", scope="pipeline") == before + 1
