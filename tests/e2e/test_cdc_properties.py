"""The spec's CDC invariants (tests/cdc_invariants.py) through the real engine: a few
examples, shrinking off (hundreds run on the pure core in the unit tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cqlcdc
from tests.cdc_invariants import KS, SETTINGS, UDT, Shape, run_example, shapes

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def engine(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One session for every example: a Spark-backed engine start is far too slow per example."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("props"), master="local[2]")
    session.execute(KS)
    session.execute(UDT)
    yield session
    session.close()


@settings(max_examples=5, **SETTINGS)  # type: ignore[arg-type]
@given(shape=shapes(), data=st.data())
def test_cdc_properties(engine: Any, shape: Shape, data: Any) -> None:
    run_example(engine, shape, data)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)  # type: ignore[arg-type]
@given(shape=shapes(), data=st.data())
def test_cdc_properties_many(engine: Any, shape: Shape, data: Any) -> None:
    run_example(engine, shape, data)
