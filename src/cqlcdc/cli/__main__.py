"""``python -m cqlcdc.cli``: the ``cqlcdc`` command, for processes started without the
console script (tests and benchmarks start ``cqlcdc serve`` so). Guarded, so that importing
every module of the package (``make wheel-check``) runs no command."""

from cqlcdc.cli import entry

if __name__ == "__main__":
    entry()
