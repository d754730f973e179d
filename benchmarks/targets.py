"""Issue 28's targets for the server, each beside its measured figure: the table
``benchmarks/server.py`` prints and the keys of its last JSON line.

>>> rows = target_rows({"writes_per_s_64": 6000.0})
>>> rows[1].met, rows[1].measured
(True, '6,000/s')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    """One row: the JSON key of its figure, how it reads, its bound and direction."""

    key: str
    figure: str
    bound: float
    at_most: bool  # the figure must stay at or under ``bound`` (else at or above it)
    unit: str

    def text(self, value: float) -> str:
        if self.unit == "/s":
            return f"{value:,.0f}/s"
        return f"{value:,.1f} {self.unit}"


TARGETS = (
    Target(
        "cpu_us_per_write_64",
        "CPU of all cqlcdc processes per acknowledged write, 64 in flight",
        100,
        True,
        "µs",
    ),
    Target(
        "writes_per_s_64", "acknowledged writes/s, 64 in flight, cheapest client", 5000, False, "/s"
    ),
    Target("ack_p50_ms_1", "ack p50, 1 in flight", 3, True, "ms"),
    Target("ack_p99_ms_64", "ack p99, 64 in flight", 50, True, "ms"),
    Target("read_p50_ms", "one-partition read p50 through the server", 3, True, "ms"),
    Target(
        "window_read_p50_ms",
        "CDC window read p50 through the server (1,000 rows, one stream)",
        20,
        True,
        "ms",
    ),
    Target("window64_read_p50_ms", "64-stream window read p50 through the server", 50, True, "ms"),
)
# the window read must also stay within this factor of the same read in-process
WINDOW_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class Row:
    figure: str
    measured: str
    target: str
    met: bool | None  # None: not measured in this run


def target_rows(summary: Mapping[str, float]) -> list[Row]:
    """The targets table for a run's summary; a figure the run did not measure says so.
    The window row also needs ``window_ratio`` (through the server over in-process)."""
    rows = []
    for t in TARGETS:
        bound = ("<= " if t.at_most else ">= ") + t.text(t.bound)
        value = summary.get(t.key)
        if value is None:
            rows.append(Row(t.figure, "not measured", bound, None))
            continue
        met = value <= t.bound if t.at_most else value >= t.bound
        measured = t.text(value)
        if t.key == "window_read_p50_ms" and "window_ratio" in summary:
            ratio = summary["window_ratio"]
            met = met and ratio <= WINDOW_RATIO
            measured += f" ({ratio:.1f}x in-process)"
            bound += f", <= {WINDOW_RATIO:g}x"
        rows.append(Row(t.figure, measured, bound, met))
    return rows


def format_rows(rows: list[Row]) -> list[str]:
    """The table as text lines, one per target."""
    width = max(len(r.figure) for r in rows)
    verdict = {True: "met", False: "NOT met", None: "-"}
    lines = [f"{'target':{width}}  {'measured':>28}  {'target':>16}"]
    for r in rows:
        lines.append(f"{r.figure:{width}}  {r.measured:>28}  {r.target:>16}  {verdict[r.met]}")
    return lines
