"""Every statement of the conformance seed cases parses and survives a render round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cqlcdc.cql import ast as a
from cqlcdc.cql import parse_statement, render, split_statements

REPO_ROOT = Path(__file__).resolve().parents[3]
SEED_CASES = REPO_ROOT / "tests" / "conformance" / "cases" / "seed_cases.json"


def _statements() -> list[tuple[str, str]]:
    cases = json.loads(SEED_CASES.read_text())
    return [
        (f"{case['id']}#{i}", step["cql"]) for case in cases for i, step in enumerate(case["steps"])
    ]


STATEMENTS = _statements()


def test_seed_cases_found() -> None:
    assert len(STATEMENTS) > 200


@pytest.mark.parametrize(("case_id", "cql"), STATEMENTS, ids=[c for c, _ in STATEMENTS])
def test_seed_statement_parses(case_id: str, cql: str) -> None:
    statement = parse_statement(cql)
    assert parse_statement(render(statement)) == statement


@pytest.mark.parametrize(("case_id", "cql"), STATEMENTS, ids=[c for c, _ in STATEMENTS])
def test_seed_statement_is_one_script_statement(case_id: str, cql: str) -> None:
    (only,) = split_statements(cql)
    assert only.text == cql
    assert (only.line, only.column) == (1, 1)


def test_timeuuid_list_index_form() -> None:
    statement = parse_statement(
        "UPDATE ks.t SET v[SCYLLA_TIMEUUID_LIST_INDEX(0dd381f0-2fea-11eb-af55-000000000001)] = 0 "
        "WHERE pk = 0 AND ck = 0;"
    )
    assert isinstance(statement, a.Update)
    assert statement.assignments == (
        a.SetElement(
            "v",
            a.FunctionCall(
                "scylla_timeuuid_list_index",
                (a.Constant("uuid", "0dd381f0-2fea-11eb-af55-000000000001"),),
            ),
            a.Constant("integer", "0"),
        ),
    )
