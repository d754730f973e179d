"""The tip file on a local disk: it follows every append, but while a micro-batch runs the
batch's end writes it once (Spark reads it only to plan the next batch); a writer waiting
for a seq still moves it at once."""

from __future__ import annotations

from pathlib import Path

from cqlcdc.pipeline.ingest_source import read_tip
from cqlcdc.pipeline.tip_pacing import TipPacer


def test_a_running_batch_holds_the_tip_until_its_end(tmp_path: Path) -> None:
    tip = tmp_path / "tip"
    pacer = TipPacer(tip, interval_s=0)
    pacer.reset(0)
    pacer.show(3)
    assert read_tip(tip) == 3  # no batch runs: at once
    pacer.hold()
    pacer.show(5)
    pacer.show(9)
    assert read_tip(tip) == 3  # the batch's end will show them
    pacer.want(5)
    assert read_tip(tip) == 9  # someone waits: the whole log's end, at once
    pacer.show(12)
    assert read_tip(tip) == 9
    pacer.release()
    assert read_tip(tip) == 12
    pacer.show(13)
    assert read_tip(tip) == 13
    pacer.stop()


def test_a_batch_that_saw_no_append_writes_nothing_more(tmp_path: Path) -> None:
    tip = tmp_path / "tip"
    pacer = TipPacer(tip, interval_s=0)
    pacer.reset(0)
    pacer.show(4)
    before = tip.stat().st_mtime_ns
    pacer.hold()
    pacer.release()
    assert read_tip(tip) == 4 and tip.stat().st_mtime_ns == before
    pacer.stop()
