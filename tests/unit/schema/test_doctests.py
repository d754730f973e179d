"""The ``>>>`` examples in the schema layer's docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["changes", "tablets", "system_catalog", "describe", "catalog"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"cqlcdc.schema.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
