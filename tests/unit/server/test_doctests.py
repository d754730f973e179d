"""The ``>>>`` examples in the wire layer's docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "notations",
    "frames",
    "segments",
    "framing",
    "requests",
    "typecodes",
    "results",
    "error_responses",
    "responses",
    "handshake",
    "budget",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"cqlcdc.server.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
