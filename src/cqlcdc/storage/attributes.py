"""ScyllaDB's ``USING TIMEOUT`` (cql3/attributes.cc ``get_timeout``): validated, then unused.

A statement here is never cut short: a read answers from the committed snapshot and a write
is acknowledged once durable, so the timeout only has to be one ScyllaDB would accept.

>>> from cqlcdc.cql import ast
>>> timeout_ms(ast.Constant("duration", "1h30m"), None)
5400000
"""

from __future__ import annotations

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import native_type
from cqlcdc.types.base import TermContext

NS_PER_MS = 1_000_000


def timeout_ms(term: ast.Term | None, ctx: TermContext | None, checked: bool = True) -> int | None:
    """The timeout of a ``USING TIMEOUT`` clause in milliseconds (None: no clause).

    ``checked=False`` only reads the duration: the timeout of a statement inside a batch,
    which ScyllaDB prepares but never evaluates (the batch's own timeout applies).

    Raises:
        InvalidRequest: ScyllaDB's message for a value that is not a duration, is null, has
            months or days, is finer than a millisecond, or is negative.
    """
    if term is None:
        return None
    value = native_type("duration").parse_literal(term, "[timeout]", ctx)
    if not checked:
        return None
    if value is None:
        raise InvalidRequest("Timeout value cannot be null")
    if value.months or value.days:
        raise InvalidRequest("Timeout values cannot be expressed in days/months")
    if value.nanoseconds % NS_PER_MS:
        raise InvalidRequest("Timeout values cannot have granularity finer than milliseconds")
    if value.nanoseconds < 0:
        raise InvalidRequest("Timeout values must be non-negative")
    return int(value.nanoseconds // NS_PER_MS)


__all__ = ["timeout_ms"]
