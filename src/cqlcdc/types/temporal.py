"""Dates, times, timestamps and timeuuid clocks: parsing as ScyllaDB does, printing as cqlsh does.

Values are integers (days since the epoch, nanoseconds since midnight, milliseconds since the
epoch) so that every date CQL allows is representable, not only Python's years 1-9999.

>>> format_timestamp(parse_timestamp("2020-11-26 11:30:25.588+0000"))
'2020-11-26 11:30:25.588000+0000'
"""

from __future__ import annotations

import datetime
import re
import uuid

from cqlcdc.errors import InvalidRequest

DAY_NS = 86_400_000_000_000
DAY_MS = 86_400_000
DATE_OFFSET = 1 << 31  # a date is serialized as an unsigned int with the epoch at 2^31
MIN_DAYS = -(1 << 31)
MAX_DAYS = (1 << 31) - 1
# 100 ns intervals between the UUID epoch (1582-10-15) and the Unix epoch
UUID_EPOCH_OFFSET = 0x01B21DD213814000

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# types/types.cc timestamp_from_string: the date part, then an optional time of day
_TIMESTAMP_RE = re.compile(r"^(\d{4})-(\d+)-(\d+)([ tT](\d+):(\d+)(:(\d+)(\.(\d+))?)?)?")
_TZ_RE = re.compile(r"^([+-])(\d{2}):?(\d{2})?$")
_DATE_RE = re.compile(r"^(-?\d+)-(\d+)-(\d+)$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """Inverse of ``days_from_civil``: (year, month, day)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def _valid_civil(year: int, month: int, day: int) -> bool:
    if not 1 <= month <= 12 or day < 1:
        return False
    return civil_from_days(days_from_civil(year, month, day)) == (year, month, day)


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """A timestamp string (or integer string) as milliseconds since the epoch.

    Accepts what ScyllaDB accepts: ``now``, an integer, ``yyyy-mm-dd[( |T)hh:mm[:ss[.fff]]]``
    followed by an optional zone ``+hhmm``, ``+hh:mm``, ``z``, ``utc`` or ``gmt``. A missing
    zone means the server's zone, which is UTC here.

    Raises:
        InvalidRequest: with ScyllaDB's message (``unable to parse date '...': ...``).
    """
    lowered = text.lower()
    if lowered == "now":
        if now_ms is None:
            raise InvalidRequest("timestamp 'now' needs a session clock to be evaluated")
        return now_ms
    if _INT_RE.match(text):
        value = int(text)
        if -(1 << 63) <= value < (1 << 63):
            return value
    try:
        return _parse_timestamp_text(lowered)
    except InvalidRequest as err:
        raise InvalidRequest(f"unable to parse date '{text}': {err.message}") from None


def _parse_timestamp_text(text: str) -> int:
    match = _TIMESTAMP_RE.search(text)
    if match is None:
        raise InvalidRequest(f"Unable to parse timestamp from '{text}'")
    year, month, day = int(match[1]), int(match[2]), int(match[3])
    if not _valid_civil(year, month, day):
        raise InvalidRequest("Day of month is not valid for year")
    hours = int(match[5]) if match[5] else 0
    minutes = int(match[6]) if match[6] else 0
    seconds = int(match[8]) if match[8] else 0
    millis = 0
    if match[10]:
        if len(match[10]) > 3:
            raise InvalidRequest(f"Milliseconds length exceeds expected ({len(match[10])})")
        millis = int(match[10].ljust(3, "0"))
    ms = days_from_civil(year, month, day) * DAY_MS
    ms += ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis
    zone = text[match.end() :]
    zone_match = _TZ_RE.match(zone)
    if zone_match:
        offset_min = int(zone_match[2]) * 60 + int(zone_match[3] or 0)
        ms -= (offset_min if zone_match[1] == "+" else -offset_min) * 60_000
    elif zone.strip() not in ("", "z", "utc", "gmt"):
        raise InvalidRequest(f"Unable to parse timezone '{zone}'")
    return ms


def parse_date(text: str) -> int:
    """A date string as days since the epoch (signed).

    ``yyyy-mm-dd`` (any year, may be negative) or an unsigned integer in ScyllaDB's raw form,
    where 2^31 is 1970-01-01.
    """
    if _INT_RE.match(text):
        value = int(text)
        if not 0 <= value < (1 << 32):
            raise InvalidRequest(f"Unable to make unsigned int (for date) from {text}")
        return value - DATE_OFFSET
    match = _DATE_RE.match(text)
    if match is None:
        raise InvalidRequest(f"Unable to coerce '{text}' to a formatted date (long)")
    year, month, day = int(match[1]), int(match[2]), int(match[3])
    if not _valid_civil(year, month, day):
        raise InvalidRequest(f"Unable to coerce '{text}' to a formatted date (long)")
    days = days_from_civil(year, month, day)
    if days < MIN_DAYS:
        raise InvalidRequest(f"Input date {text} is less than min supported date -5877641-06-23")
    if days > MAX_DAYS:
        raise InvalidRequest(f"Input date {text} is greater than max supported date 5881580-07-11")
    return days


def parse_time(text: str) -> int:
    """``hh:mm:ss[.fffffffff]`` as nanoseconds since midnight (types.cc time_type_impl)."""
    format_error = "Timestamp format must be hh:mm:ss[.fffffffff]"
    parts = text.split(":")
    if len(parts) != 3:
        raise InvalidRequest(format_error)
    seconds_text, _, fraction = parts[2].partition(".")
    try:
        hours, minutes, seconds = int(parts[0]), int(parts[1]), int(seconds_text)
        nanos = int(fraction) if fraction else 0
    except ValueError:
        raise InvalidRequest(format_error) from None
    if not 0 <= hours < 24:
        raise InvalidRequest(f"Hour out of bounds ({hours}).")
    if not 0 <= minutes < 60:
        raise InvalidRequest(f"Minute out of bounds ({minutes}).")
    if not 0 <= seconds < 60:
        raise InvalidRequest(f"Second out of bounds ({seconds}).")
    if len(fraction) > 9:
        raise InvalidRequest(f"more than 9 nanosecond digits: {text}")
    if fraction:
        nanos *= 10 ** (9 - len(fraction))
        if nanos < 0:
            raise InvalidRequest(f"Nanosecond out of bounds ({nanos}).")
    return ((hours * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos


def format_timestamp(ms: int) -> str:
    """cqlsh's text (``%Y-%m-%d %H:%M:%S.%f%z`` in UTC; milliseconds if out of range)."""
    try:
        moment = _EPOCH + datetime.timedelta(milliseconds=ms)
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f%z")
    except (OverflowError, ValueError):
        return str(ms)


def format_date(days: int) -> str:
    """cqlsh's text for a date: ``yyyy-mm-dd`` within years 1-9999, else the day count."""
    year, month, day = civil_from_days(days)
    if 1 <= year <= 9999:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return str(days)


def format_time(nanos: int) -> str:
    """cqlsh's text for a time of day: always nine fractional digits."""
    seconds, frac = divmod(nanos, 1_000_000_000)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours:02d}:{minute:02d}:{sec:02d}.{frac:09d}"


def date_literal(days: int) -> str:
    """A CQL string literal for a date that ``parse_date`` reads back (any year)."""
    year, month, day = civil_from_days(days)
    return f"'{year:04d}-{month:02d}-{day:02d}'" if year >= 0 else f"'{year}-{month}-{day}'"


def timeuuid_us(value: uuid.UUID) -> int:
    """The timestamp of a version-1 UUID in microseconds since the epoch."""
    return (value.time - UUID_EPOCH_OFFSET) // 10


def timeuuid_ms(value: uuid.UUID) -> int:
    """The timestamp of a version-1 UUID in milliseconds since the epoch."""
    return (value.time - UUID_EPOCH_OFFSET) // 10_000


def _timeuuid(ticks: int, lsb: int) -> uuid.UUID:
    time_low = ticks & 0xFFFFFFFF
    time_mid = (ticks >> 32) & 0xFFFF
    time_hi = ((ticks >> 48) & 0x0FFF) | 0x1000
    msb = (time_low << 32) | (time_mid << 16) | time_hi
    return uuid.UUID(int=(msb << 64) | lsb)


def min_timeuuid(ms: int) -> uuid.UUID:
    """The smallest timeuuid of a millisecond (``mintimeuuid``); lsb compare is signed."""
    return _timeuuid(ms * 10_000 + UUID_EPOCH_OFFSET, 0x8080808080808080)


def max_timeuuid(ms: int) -> uuid.UUID:
    """The largest timeuuid of a millisecond (``maxtimeuuid``)."""
    return _timeuuid(ms * 10_000 + UUID_EPOCH_OFFSET + 9_999, 0x7F7F7F7F7F7F7F7F)


__all__ = [
    "DATE_OFFSET",
    "DAY_MS",
    "DAY_NS",
    "MAX_DAYS",
    "MIN_DAYS",
    "UUID_EPOCH_OFFSET",
    "civil_from_days",
    "date_literal",
    "days_from_civil",
    "format_date",
    "format_time",
    "format_timestamp",
    "max_timeuuid",
    "min_timeuuid",
    "parse_date",
    "parse_time",
    "parse_timestamp",
    "timeuuid_ms",
    "timeuuid_us",
]
