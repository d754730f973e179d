"""The CQL type system: one small class per type, type resolution, literals, cqlsh text, codecs.

>>> from cqlcdc.cql.ast import Constant
>>> t = native_type("int")
>>> t.parse_literal(Constant("integer", "42"), "v"), t.to_cqlsh(42)
(42, '42')
"""

from __future__ import annotations

from typing import Any

from cqlcdc.cql.ast import Term
from cqlcdc.types.arrow import to_pylist
from cqlcdc.types.base import CqlType, TermContext, install_term_evaluation
from cqlcdc.types.collections import InValuesType, ListType, MapType, SetType, VectorType
from cqlcdc.types.dates import DateType, TimestampType, TimeType
from cqlcdc.types.functions import TERMS
from cqlcdc.types.native import (
    AsciiType,
    BlobType,
    BooleanType,
    DurationType,
    InetType,
    NativeType,
    TextType,
    TimeuuidType,
    UuidType,
)
from cqlcdc.types.numeric import (
    BigintType,
    CounterType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    SmallintType,
    TinyintType,
    VarintType,
)
from cqlcdc.types.resolve import NATIVE_TYPES, UdtLookup, native_type, resolve_type
from cqlcdc.types.udt import TupleType, UserType
from cqlcdc.types.values import Duration, MapValue, UdtValue


def parse_literal(term: Term, column: Any, ctx: TermContext | None = None) -> Any:
    """Interpret ``term`` as a value of ``column``'s type (a CqlType or anything with
    ``.name`` and ``.type``, such as ``cqlcdc.schema.model.Column``).

    Raises:
        InvalidRequest: the literal does not fit (ScyllaDB's wording).
    """
    if isinstance(column, CqlType):
        return column.parse_literal(term, "value", ctx)
    cql_type: CqlType = column.type
    return cql_type.parse_literal(term, column.name, ctx)


# function calls and casts in literals need every type: installed before any is used
install_term_evaluation(TERMS)

__all__ = [
    "NATIVE_TYPES",
    "AsciiType",
    "BigintType",
    "BlobType",
    "BooleanType",
    "CounterType",
    "CqlType",
    "DateType",
    "DecimalType",
    "DoubleType",
    "Duration",
    "DurationType",
    "FloatType",
    "InValuesType",
    "InetType",
    "IntType",
    "ListType",
    "MapType",
    "MapValue",
    "NativeType",
    "SetType",
    "SmallintType",
    "TermContext",
    "TextType",
    "TimeType",
    "TimestampType",
    "TimeuuidType",
    "TinyintType",
    "TupleType",
    "UdtLookup",
    "UdtValue",
    "UserType",
    "UuidType",
    "VarintType",
    "VectorType",
    "native_type",
    "parse_literal",
    "resolve_type",
    "to_pylist",
]
