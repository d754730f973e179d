"""Every worked example of the spec, through the real engine (``cqlcdc run --format json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance.harness import CaseRun, check_case, load_cases, run_all

CASES = load_cases()


def _marks(case: dict[str, Any]) -> list[Any]:
    notes = case.get("notes", "")
    if notes.startswith("KNOWN DOC ERROR:"):
        return [pytest.mark.xfail(strict=True, reason="known doc error; see its -corrected twin")]
    return []


@pytest.fixture(scope="session")
def conformance_runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseRun]:
    workdir: Path = tmp_path_factory.mktemp("conformance")
    return run_all(CASES, workdir)


@pytest.mark.spark
@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c["id"], marks=_marks(c)) for c in CASES if c.get("kind") != "informative"],
)
def test_seed_case(case: dict[str, Any], conformance_runs: dict[str, CaseRun]) -> None:
    check_case(conformance_runs[case["id"]])


@pytest.mark.spark
@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c["id"]) for c in CASES if c.get("kind") == "informative"]
)
def test_informative_case_runs(case: dict[str, Any], conformance_runs: dict[str, CaseRun]) -> None:
    """Informative cases assert no outcome (the doc discusses concurrent writes), but run
    sequentially every statement must succeed."""
    run = conformance_runs[case["id"]]
    assert [r["ok"] for r in run.results] == [True] * len(case["steps"]), run.results
