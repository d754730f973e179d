"""``c[k]``: one element of a collection value, for WHERE filters (``m[k] = v``) and
selectors (``SELECT m[k]``) alike.

>>> from cqlcdc.types import native_type, ListType
>>> [t.cql_name for t in subscript_types(ListType(native_type("text")), "l")]
['int', 'text']
>>> element_of(("a", "b"), 1), element_of(frozenset({3}), 3), element_of(None, 1)
('b', 3, None)
"""

from __future__ import annotations

from typing import Any

from cqlcdc.errors import InvalidRequest
from cqlcdc.types import ListType, MapType, SetType, native_type
from cqlcdc.types.base import CqlType


def subscript_types(ctype: CqlType, column: str) -> tuple[CqlType, CqlType]:
    """The key's type and the element's type of ``column[k]``: a map's key and value, a
    list's index and element, a set's element (both).

    Raises:
        InvalidRequest: not a collection (ScyllaDB's message).
    """
    if isinstance(ctype, MapType):
        return ctype.key, ctype.value
    if isinstance(ctype, ListType):
        return native_type("int"), ctype.elem
    if isinstance(ctype, SetType):
        return ctype.elem, ctype.elem
    raise InvalidRequest(f"Column {column} is not a map/set/list, cannot be subscripted")


def element_of(value: Any, key: Any) -> Any:
    """The element at ``key`` of a collection value (a set's own element if present), or
    None where there is none."""
    if value is None or key is None:
        return None
    if isinstance(value, frozenset):
        return key if key in value else None
    if isinstance(value, tuple):  # a list: by index
        return value[key] if 0 <= key < len(value) else None
    return value.get(key)


__all__ = ["element_of", "subscript_types"]
