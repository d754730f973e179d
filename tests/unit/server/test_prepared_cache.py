"""The server's prepared statements are a bounded LRU cache (a client cannot grow it
without bound by preparing ever new statements)."""

from __future__ import annotations

from typing import Any, cast

from cqlcdc.server.statements import Prepared, PreparedCache


def _entry(n: int) -> Prepared:
    return cast(Prepared, ("prepared", n))


def test_the_least_recently_used_statement_is_evicted_past_the_limit() -> None:
    cache = PreparedCache(limit=3)
    for n in range(3):
        cache[bytes([n])] = _entry(n)
    assert cache.get(b"\x00") == _entry(0)  # used: now the newest
    cache[b"\x03"] = _entry(3)
    assert len(cache) == 3
    assert cache.get(b"\x01") is None  # the least recently used went
    assert [cache.get(bytes([n])) for n in (0, 2, 3)] == [_entry(0), _entry(2), _entry(3)]
    cache.pop(b"\x02")
    assert cache.get(b"\x02") is None and len(cache) == 2
    cache.clear()
    assert len(cache) == 0


def test_many_distinct_statements_keep_the_cache_at_its_limit() -> None:
    cache = PreparedCache(limit=100)
    for n in range(10_000):
        cache[n.to_bytes(4, "big")] = cast(Any, n)
    assert len(cache) == 100
    assert cache.get((9_999).to_bytes(4, "big")) == 9_999
