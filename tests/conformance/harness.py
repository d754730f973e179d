"""Run the spec's conformance cases through ``cqlcdc run --format json`` and compare by the
rules of ``tests/conformance/cases/README.md``."""

from __future__ import annotations

import io
import itertools
import json
import re
import uuid
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CASES_FILE = Path(__file__).resolve().parent / "cases" / "seed_cases.json"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
EPOCH = 0x01B21DD213814000
RESET = [
    "DROP KEYSPACE IF EXISTS ks;",
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};",
]


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(CASES_FILE.read_text())
    return cases


def micros(u: str) -> int:
    x = uuid.UUID(u)
    t = ((x.time_hi_version & 0x0FFF) << 48) | (x.time_mid << 32) | x.time_low
    return (t - EPOCH) // 10


def ticks(u: str) -> int:
    x = uuid.UUID(u)
    return ((x.time_hi_version & 0x0FFF) << 48) | (x.time_mid << 32) | x.time_low


@dataclass
class CaseRun:
    """The JSON results of one case's steps (in step order)."""

    case: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)


def build_script(cases: list[dict[str, Any]]) -> tuple[str, list[tuple[str, int]]]:
    """One script running every case after a keyspace reset; maps statement index -> case."""
    lines: list[str] = []
    owners: list[tuple[str, int]] = []
    for case in cases:
        for stmt in RESET:
            lines.append(stmt)
            owners.append(("", -1))
        for i, step in enumerate(case["steps"]):
            text = step["cql"].strip()
            if not text.endswith(";") and not text.upper().endswith("APPLY BATCH"):
                text += ";"
            lines.append(text)
            owners.append((case["id"], i))
    return "\n".join(lines) + "\n", owners


def run_all(cases: list[dict[str, Any]], workdir: Path) -> dict[str, CaseRun]:
    """Run every case through the CLI in this process (reusing the test SparkSession)."""
    from cqlcdc.cli import main

    script, owners = build_script(cases)
    path = workdir / "conformance.cql"
    path.write_text(script)
    out = io.StringIO()
    with redirect_stdout(out):
        main(["run", str(path), "--format", "json", "--data-dir", str(workdir / "data")])
    return collect_runs(cases, owners, out.getvalue())


def collect_runs(
    cases: list[dict[str, Any]], owners: list[tuple[str, int]], output: str
) -> dict[str, CaseRun]:
    """Split the JSON lines ``cqlcdc run --format json`` printed for ``build_script``'s
    script into each case's results (in-process, or ``--connect`` to a server)."""
    results = [json.loads(line) for line in output.splitlines() if line.strip()]
    runs = {c["id"]: CaseRun(c) for c in cases}
    assert len(results) == len(owners), (len(results), len(owners))
    for (case_id, _), res in zip(owners, results, strict=True):
        if case_id:
            runs[case_id].results.append(res)
        elif not res["ok"]:
            raise AssertionError(f"keyspace reset failed: {res}")
    return runs


class UuidRenaming:
    """The one-to-one renaming of generated list timeuuids, consistent across a case."""

    def __init__(self, literals: set[str]) -> None:
        self.forward: dict[str, str] = {u: u for u in literals}
        self.backward: dict[str, str] = {u: u for u in literals}

    def bind(self, expected: str, actual: str) -> None:
        if self.forward.get(expected, actual) != actual:
            raise AssertionError(
                f"timeuuid {expected} maps to {self.forward[expected]} and to {actual}"
            )
        if self.backward.get(actual, expected) != expected:
            raise AssertionError(f"timeuuid {actual} is the image of two expected uuids")
        self.forward[expected] = actual
        self.backward[actual] = expected


def compare_cell(expected: str, actual: str | None, renaming: UuidRenaming) -> None:
    actual_text = "null" if actual is None else actual
    exp_ids = UUID_RE.findall(expected)
    act_ids = UUID_RE.findall(actual_text)
    if len(exp_ids) != len(act_ids):
        raise AssertionError(f"cell {actual_text!r} != {expected!r}")
    if UUID_RE.sub("U", expected) != UUID_RE.sub("U", actual_text):
        raise AssertionError(f"cell {actual_text!r} != {expected!r}")
    for e, a in zip(exp_ids, act_ids, strict=True):
        renaming.bind(e, a)
    times = [ticks(a) for a in act_ids]
    if "{" in actual_text and times != sorted(times):
        raise AssertionError(f"keys not in time order: {actual_text}")


def compare_select(
    expect: dict[str, Any], result: dict[str, Any], renaming: UuidRenaming, notes: str
) -> None:
    assert result["ok"], result.get("error")
    assert result["columns"] == expect["columns"], (result["columns"], expect["columns"])
    exp_rows, act_rows = expect["rows"], result["rows"]
    assert len(act_rows) == len(exp_rows), f"{len(act_rows)} rows, expected {len(exp_rows)}"
    cols = expect["columns"]
    time_col = cols.index("cdc$time") if "cdc$time" in cols else None
    if time_col is not None:
        _compare_times([r[time_col] for r in exp_rows], [r[time_col] for r in act_rows], notes)
    for er, ar in zip(exp_rows, act_rows, strict=True):
        for i, (e, a) in enumerate(zip(er, ar, strict=True)):
            if i == time_col:
                continue
            compare_cell(e, a, renaming)


def _compare_times(expected: list[str], actual: list[str], notes: str) -> None:
    pairs: dict[str, str] = {}
    for e, a in zip(expected, actual, strict=True):
        if pairs.setdefault(e, a) != a:
            raise AssertionError(f"rows printed with one cdc$time {e} have different values")
    distinct_actual = list(dict.fromkeys(actual))
    if len(set(pairs.values())) != len(pairs):
        raise AssertionError("different printed cdc$time values share an actual value")
    order = [ticks(a) for a in distinct_actual]
    if any(b <= a for a, b in itertools.pairwise(order)):
        raise AssertionError(f"cdc$time not strictly increasing: {distinct_actual}")
    for us in (int(m) for m in re.findall(r"\b(1\d{15})\b", notes)):
        if not any(micros(a) == us for a in actual):
            raise AssertionError(f"no cdc$time with embedded timestamp {us}: {actual}")


def check_case(run: CaseRun) -> None:
    case = run.case
    literals = set()
    for step in case["steps"]:
        literals.update(UUID_RE.findall(step["cql"].lower()))
    renaming = UuidRenaming(literals)
    notes = case.get("notes", "")
    assert len(run.results) == len(case["steps"])
    for i, (step, res) in enumerate(zip(case["steps"], run.results, strict=True)):
        where = f"step {i}: {step['cql']}"
        if "expect_error" in step:
            assert not res["ok"], f"{where}: expected error {step['expect_error']!r}"
            want = step["expect_error"].rstrip(".")
            got = res["error"]["message"]
            assert want in got.rstrip("."), f"{where}: error {got!r} lacks {want!r}"
        elif "expect" in step:
            try:
                compare_select(step["expect"], res, renaming, notes)
            except AssertionError as e:
                raise AssertionError(f"{where}: {e}\nactual: {res}") from e
        elif "expect_describe_contains" in step:
            assert res["ok"], f"{where}: {res.get('error')}"
            text = res["rows"][0][0]
            lines = {ln.strip().rstrip(",") for ln in text.splitlines()}
            for want in step["expect_describe_contains"]:
                assert want.strip().rstrip(",") in lines, f"{where}: no line {want!r} in\n{text}"
        else:
            assert res["ok"], f"{where}: {res.get('error')}"
