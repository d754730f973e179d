"""CQL durations: parsing the literal forms, printing, the protocol encoding.

Ported from ScyllaDB's ``types/duration.cc``: the standard form ``1y2mo3w4d5h6m7s8ms9us10ns``
(units in decreasing order, each once), ISO 8601 ``P1Y2M3DT4H5M6S``, ``P2W`` and
``P0001-02-03T04:05:06``, each with an optional leading ``-``. Printing is Cassandra's
``Duration.toString`` (also cqlsh's): years and months, days, then h/m/s/ms/us/ns; no weeks.

>>> format_duration(parse_duration("90m"))
'1h30m'
"""

from __future__ import annotations

import re

from cqlcdc.errors import InvalidRequest
from cqlcdc.types.marshal import vint_pack, vint_unpack
from cqlcdc.types.values import Duration

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
NS_PER_HOUR = 60 * NS_PER_MIN

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

# unit -> (order index, counter, factor, long name); larger index = larger unit
_UNITS: dict[str, tuple[int, str, int, str]] = {
    "y": (9, "months", 12, "years"),
    "mo": (8, "months", 1, "months"),
    "w": (7, "days", 7, "weeks"),
    "d": (6, "days", 1, "days"),
    "h": (5, "nanoseconds", NS_PER_HOUR, "hours"),
    "m": (4, "nanoseconds", NS_PER_MIN, "minutes"),
    "s": (3, "nanoseconds", NS_PER_S, "seconds"),
    "ms": (2, "nanoseconds", NS_PER_MS, "milliseconds"),
    "us": (1, "nanoseconds", NS_PER_US, "microseconds"),
    "µs": (1, "nanoseconds", NS_PER_US, "microseconds"),
    "ns": (0, "nanoseconds", 1, "nanoseconds"),
}
_LIMITS = {"months": INT32_MAX, "days": INT32_MAX, "nanoseconds": INT64_MAX}

_STANDARD_RE = re.compile(r"(\d+)(y|mo|w|d|h|s|ms|us|µs|ns|m)", re.IGNORECASE)
_ISO_RE = re.compile(r"P((\d+)Y)?((\d+)M)?((\d+)D)?(T((\d+)H)?((\d+)M)?((\d+)S)?)?")
_ISO_ALT_RE = re.compile(r"P(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})")
_ISO_WEEK_RE = re.compile(r"P(\d+)W")


class _Builder:
    """Adds unit counts in decreasing unit order, with ScyllaDB's overflow messages."""

    def __init__(self) -> None:
        self.counters = {"months": 0, "days": 0, "nanoseconds": 0}
        self.last_index: int | None = None
        self.last_name = ""

    def add(self, count_text: str, unit: str) -> None:
        index, counter, factor, long_name = _UNITS[unit]
        count = int(count_text)
        if count > INT64_MAX:
            raise InvalidRequest(f"Invalid duration. The count for the {long_name} is out of range")
        available = (_LIMITS[counter] - self.counters[counter]) // factor
        if count > available:
            raise InvalidRequest(
                f"Invalid duration. The number of {long_name} must be less than or equal to "
                f"{available}"
            )
        if self.last_index is not None:
            if index == self.last_index:
                raise InvalidRequest(
                    f"Invalid duration. The {long_name} are specified multiple times"
                )
            if index > self.last_index:
                raise InvalidRequest(
                    f"Invalid duration. The {self.last_name} should be after {long_name}"
                )
        self.last_index, self.last_name = index, long_name
        self.counters[counter] += count * factor

    def build(self) -> Duration:
        c = self.counters
        return Duration(c["months"], c["days"], c["nanoseconds"])


def _parse_unsigned(text: str) -> Duration | None:
    builder = _Builder()
    if not text:
        return None
    if text[0] == "P":
        if text[-1] == "W":
            match = _ISO_WEEK_RE.fullmatch(text)
            if match is None:
                return None
            builder.add(match[1], "w")
        elif "-" in text:
            match = _ISO_ALT_RE.fullmatch(text)
            if match is None:
                return None
            for group, unit in zip(range(1, 7), ("y", "mo", "d", "h", "m", "s")):
                builder.add(match[group], unit)
        else:
            match = _ISO_RE.fullmatch(text)
            if match is None:
                return None
            for group, unit in ((2, "y"), (4, "mo"), (6, "d"), (9, "h"), (11, "m"), (13, "s")):
                if match[group] is not None:
                    builder.add(match[group], unit)
        return builder.build()
    position = 0
    while position < len(text):
        match = _STANDARD_RE.match(text, position)
        if match is None:
            return None
        builder.add(match[1], match[2].lower())
        position = match.end()
    return builder.build()


def parse_duration(text: str) -> Duration:
    """A duration literal as a Duration.

    Raises:
        InvalidRequest: ``Unable to convert 'x' to a duration`` or an overflow/order message.
    """
    negative = text.startswith("-")
    parsed = _parse_unsigned(text[1:] if negative else text)
    if parsed is None:
        raise InvalidRequest(f"Unable to convert '{text}' to a duration")
    if negative:
        return Duration(-parsed.months, -parsed.days, -parsed.nanoseconds)
    return parsed


def check_duration(value: Duration) -> None:
    """Raise InvalidRequest unless the counters fit their widths and share one sign."""
    for name, bits in (("months", 32), ("days", 32), ("nanoseconds", 64)):
        count = getattr(value, name)
        if not isinstance(count, int) or not -(1 << (bits - 1)) <= count < (1 << (bits - 1)):
            raise InvalidRequest(f"The duration {name} ({count}) must be a {bits} bit integer")
    parts = (value.months, value.days, value.nanoseconds)
    if any(p < 0 for p in parts) and any(p > 0 for p in parts):
        raise InvalidRequest(
            "The duration months, days, and nanoseconds must be all of the same sign "
            f"({value.months}, {value.days}, {value.nanoseconds})"
        )


def format_duration(value: Duration) -> str:
    """Cassandra's ``Duration.toString`` (a zero duration is the empty string, as in cqlsh)."""
    out: list[str] = []
    if value.months < 0 or value.days < 0 or value.nanoseconds < 0:
        out.append("-")

    def append(count: int, divisor: int, unit: str) -> int:
        if count == 0 or count < divisor:
            return count
        out.append(f"{count // divisor}{unit}")
        return count % divisor

    append(append(abs(value.months), 12, "y"), 1, "mo")
    append(abs(value.days), 1, "d")
    rest = abs(value.nanoseconds)
    for divisor, unit in (
        (NS_PER_HOUR, "h"),
        (NS_PER_MIN, "m"),
        (NS_PER_S, "s"),
        (NS_PER_MS, "ms"),
        (NS_PER_US, "us"),
        (1, "ns"),
    ):
        rest = append(rest, divisor, unit)
    return "".join(out)


def serialize_duration(value: Duration) -> bytes:
    """Three signed vints: months, days, nanoseconds (native protocol v5 / Cassandra)."""
    return vint_pack(value.months) + vint_pack(value.days) + vint_pack(value.nanoseconds)


def deserialize_duration(data: bytes) -> Duration:
    """Inverse of ``serialize_duration``."""
    if len(data) < 3:
        raise InvalidRequest(f"Expected at least 3 bytes for a duration, got {len(data)}")
    try:
        months, offset = vint_unpack(data, 0)
        days, offset = vint_unpack(data, offset)
        nanoseconds, offset = vint_unpack(data, offset)
    except (IndexError, ValueError):
        raise InvalidRequest("Cannot deserialize duration") from None
    if offset != len(data):
        raise InvalidRequest("Cannot deserialize duration")
    value = Duration(months, days, nanoseconds)
    check_duration(value)
    return value


__all__ = [
    "check_duration",
    "deserialize_duration",
    "format_duration",
    "parse_duration",
    "serialize_duration",
]
