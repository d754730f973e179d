"""``python -m cqlcdc.cli``: the ``cqlcdc`` command, for processes started without the
console script (``cqlcdc serve --workers`` starts its protocol workers so, as do tests)."""

from cqlcdc.cli import entry

entry()
