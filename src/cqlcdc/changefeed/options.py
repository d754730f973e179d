"""``ADD CHANGEFEED name WITH (...)`` options, validated with YDB's defaults and limits.

The catalog keeps each option as raw CQL text; this module is the one place that reads it,
so DDL and the pipeline agree on what a feed means.

>>> feed_options_from_texts((("MODE", "'UPDATES'"), ("FORMAT", "'JSON'"))).retention_ms
86400000
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal, TypeAlias, cast

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.types.terms import term_text

Mode: TypeAlias = Literal["KEYS_ONLY", "UPDATES", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]
Format: TypeAlias = Literal["JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON"]

MODES: tuple[Mode, ...] = ("KEYS_ONLY", "UPDATES", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
FORMATS: tuple[Format, ...] = ("JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON")

DAY_MS = 86_400_000
DEFAULT_RETENTION_MS = DAY_MS  # YDB: records are kept 24 hours by default
MAX_RETENTION_MS = 30 * DAY_MS  # YDB: "can be reduced or increased up to 30 days"
# YDB's default is the number of table partitions; a cqlcdc table is not range-split into
# partitions, so a feed gets one topic partition unless TOPIC_MIN_ACTIVE_PARTITIONS says more.
DEFAULT_PARTITIONS = 1
MAX_PARTITIONS = 1024  # ours: a guard against typos, far above what one Spark job serves

# YDB options whose record shape is undocumented or whose topics we cannot provide
_UNSUPPORTED = {
    "TOPIC_AUTO_PARTITIONING": "topics have a fixed number of partitions",
    "USER_SIDS": "records carry no user identities",
    "TRACE_IDS": "records carry no trace ids",
    "SCHEMA_CHANGES": "schema change records are not produced",
    "SINK_TYPE": "every changefeed is a local topic",
}
_KNOWN = (
    "MODE",
    "FORMAT",
    "VIRTUAL_TIMESTAMPS",
    "BARRIERS_INTERVAL",
    "RETENTION_PERIOD",
    "TOPIC_MIN_ACTIVE_PARTITIONS",
    "INITIAL_SCAN",
    "AWS_REGION",
    "EXPIRY_EVENTS",
)

# ISO-8601 durations as YDB's Interval accepts them: weeks or days, then a time part; no
# years or months (they have no fixed length). Seconds may have a fraction (to microseconds).
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,6})?)S)?)?$"
)


@dataclass(frozen=True, slots=True)
class FeedOptions:
    """One changefeed's settings (docs/changefeeds.md, "Options").

    Attributes:
        mode: what a record carries: ``KEYS_ONLY``, ``UPDATES``, ``NEW_IMAGE``,
            ``OLD_IMAGE`` or ``NEW_AND_OLD_IMAGES``.
        format: ``JSON``, ``DEBEZIUM_JSON`` or ``DYNAMODB_STREAMS_JSON``.
        virtual_timestamps: add ``ts: [step, txId]`` to JSON records.
        barriers_interval_ms: emit ``{"resolved": [step, txId]}`` into every partition this
            often; None: no barriers.
        retention_ms: how long the topic keeps a record.
        partitions: the topic's fixed partition count.
        initial_scan: export the rows that exist when the feed is created.
        aws_region: ``awsRegion`` of DynamoDB Streams records; None when the feed sets
            none: the server's default then (YDB's ``SetAwsRegion``, ``cqlcdc serve
            --aws-region``), see ``with_aws_region``.
        ttl_expiry_events: our extension (``EXPIRY_EVENTS``): emit erase records for rows removed
            by TTL expiry, marked as expiry; off, such rows leave the feed silently.
    """

    mode: Mode
    format: Format
    virtual_timestamps: bool = False
    barriers_interval_ms: int | None = None
    retention_ms: int = DEFAULT_RETENTION_MS
    partitions: int = DEFAULT_PARTITIONS
    initial_scan: bool = False
    aws_region: str | None = None
    ttl_expiry_events: bool = False

    @property
    def has_old_image(self) -> bool:
        return self.mode in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES")

    @property
    def has_new_image(self) -> bool:
        return self.mode in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES")


def parse_feed_options(stmt: ast.AddChangefeed) -> FeedOptions:
    """Validate the ``WITH (...)`` options of ``ADD CHANGEFEED``.

    Args:
        stmt: the parsed action; option names are upper-cased by the parser.

    Returns:
        The feed's options with YDB's defaults for those not given.

    Raises:
        InvalidRequest: an unknown or unsupported option, a value of the wrong kind or out
            of range, MODE or FORMAT missing, or AWS_REGION / BARRIERS_INTERVAL with a
            format that cannot carry them. The message names the option and the value.
    """
    given = dict(stmt.options)
    for name in given:
        if name in _UNSUPPORTED:
            raise InvalidRequest(
                f"Changefeed setting {name} is not supported: {_UNSUPPORTED[name]}"
            )
        if name not in _KNOWN:
            raise InvalidRequest(f"Unknown changefeed setting: {name}")
    if "MODE" not in given:
        raise InvalidRequest(f"Changefeed MODE is required (one of {', '.join(MODES)})")
    if "FORMAT" not in given:
        raise InvalidRequest(f"Changefeed FORMAT is required (one of {', '.join(FORMATS)})")
    mode = cast(Mode, _choice("MODE", given["MODE"], MODES))
    fmt = cast(Format, _choice("FORMAT", given["FORMAT"], FORMATS))
    barriers_ms = None
    if "BARRIERS_INTERVAL" in given:
        barriers_ms = _interval_ms("BARRIERS_INTERVAL", given["BARRIERS_INTERVAL"])
        if fmt != "JSON":
            # YDB's Debezium and DynamoDB serializers have no heartbeat form
            raise InvalidRequest(
                f"BARRIERS_INTERVAL is only supported with FORMAT = 'JSON', not '{fmt}'"
            )
    retention_ms = DEFAULT_RETENTION_MS
    if "RETENTION_PERIOD" in given:
        retention_ms = _interval_ms("RETENTION_PERIOD", given["RETENTION_PERIOD"])
        if retention_ms > MAX_RETENTION_MS:
            raise InvalidRequest(
                f"Invalid RETENTION_PERIOD {_term_text(given['RETENTION_PERIOD'])}: "
                f"the maximum is 30 days (Interval('P30D'))"
            )
    partitions = DEFAULT_PARTITIONS
    if "TOPIC_MIN_ACTIVE_PARTITIONS" in given:
        partitions = _integer("TOPIC_MIN_ACTIVE_PARTITIONS", given["TOPIC_MIN_ACTIVE_PARTITIONS"])
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidRequest(
                f"Invalid TOPIC_MIN_ACTIVE_PARTITIONS {partitions}: "
                f"must be between 1 and {MAX_PARTITIONS}"
            )
    aws_region = None
    if "AWS_REGION" in given:
        aws_region = _string("AWS_REGION", given["AWS_REGION"])
        if fmt != "DYNAMODB_STREAMS_JSON":
            raise InvalidRequest(
                f"AWS_REGION is only supported with FORMAT = 'DYNAMODB_STREAMS_JSON', not '{fmt}'"
            )
    return FeedOptions(
        mode=mode,
        format=fmt,
        virtual_timestamps=_bool("VIRTUAL_TIMESTAMPS", given.get("VIRTUAL_TIMESTAMPS")),
        barriers_interval_ms=barriers_ms,
        retention_ms=retention_ms,
        partitions=partitions,
        initial_scan=_bool("INITIAL_SCAN", given.get("INITIAL_SCAN")),
        aws_region=aws_region,
        ttl_expiry_events=_bool("EXPIRY_EVENTS", given.get("EXPIRY_EVENTS")),
    )


def feed_options_from_texts(options: tuple[tuple[str, str], ...]) -> FeedOptions:
    """Read a feed's options back from the catalog's raw texts (``TableSchema.changefeeds``).

    Raises:
        InvalidRequest: as ``parse_feed_options``, or a text that is not a CQL term.
    """
    # quoted names: a stored name may be a CQL keyword; the DDL parser upper-cases them anyway
    clause = ", ".join('"' + name.replace('"', '""') + f'" = {text}' for name, text in options)
    try:
        stmt = parse_statement(f"ALTER TABLE ks.t ADD CHANGEFEED feed WITH ({clause})")
    except CqlSyntaxError as exc:
        raise InvalidRequest(f"Invalid changefeed option text: {exc.message}") from None
    assert isinstance(stmt, ast.AlterTable) and isinstance(stmt.action, ast.AddChangefeed)
    return parse_feed_options(stmt.action)


def to_texts(options: FeedOptions) -> tuple[tuple[str, str], ...]:
    """The options as raw CQL texts in the catalog's form; defaults are left out.

    ``feed_options_from_texts(to_texts(o)) == o`` for every valid ``o``.
    """
    texts: list[tuple[str, str]] = [
        ("MODE", f"'{options.mode}'"),
        ("FORMAT", f"'{options.format}'"),
    ]
    if options.virtual_timestamps:
        texts.append(("VIRTUAL_TIMESTAMPS", "true"))
    if options.barriers_interval_ms is not None:
        texts.append(
            ("BARRIERS_INTERVAL", f"interval('{iso_duration(options.barriers_interval_ms)}')")
        )
    if options.retention_ms != DEFAULT_RETENTION_MS:
        texts.append(("RETENTION_PERIOD", f"interval('{iso_duration(options.retention_ms)}')"))
    if options.partitions != DEFAULT_PARTITIONS:
        texts.append(("TOPIC_MIN_ACTIVE_PARTITIONS", str(options.partitions)))
    if options.initial_scan:
        texts.append(("INITIAL_SCAN", "true"))
    if options.aws_region is not None:
        texts.append(("AWS_REGION", "'" + options.aws_region.replace("'", "''") + "'"))
    if options.ttl_expiry_events:
        texts.append(("EXPIRY_EVENTS", "true"))
    return tuple(texts)


def with_aws_region(options: FeedOptions, default: str) -> FeedOptions:
    """The options a record is made with: a DynamoDB Streams feed that sets no AWS_REGION
    takes the server's ``default`` (YDB: ``stream.AwsRegion.GetOrElse(<config region>)``);
    an explicit ``AWS_REGION = ''`` stays empty."""
    if options.aws_region is None and options.format == "DYNAMODB_STREAMS_JSON":
        return replace(options, aws_region=default)
    return options


def parse_iso_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration (``PT1S``, ``P1DT12H``, ``PT0.5S``); None if the
    text is not one (or has years/months, which have no fixed length)."""
    upper = text.strip().upper()
    match = _ISO_DURATION.match(upper)
    if match is None or upper in ("P", "PT") or upper.endswith("T"):
        return None
    parts = {k: Decimal(v) if v else Decimal(0) for k, v in match.groupdict().items()}
    seconds = (((parts["w"] * 7 + parts["d"]) * 24 + parts["h"]) * 60 + parts["m"]) * 60 + parts[
        "s"
    ]
    return int(seconds * 1000)


def iso_duration(ms: int) -> str:
    """The shortest ISO-8601 text of a whole number of milliseconds (``PT1S``, ``P30D``)."""
    days, rem = divmod(ms, DAY_MS)
    hours, rem = divmod(rem, 3_600_000)
    minutes, rem = divmod(rem, 60_000)
    seconds, millis = divmod(rem, 1000)
    text = "P" + (f"{days}D" if days else "")
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if seconds or millis:
        time += f"{seconds}.{millis:03d}".rstrip("0").rstrip(".") + "S"
    if time:
        text += "T" + time
    return text if text != "P" else "PT0S"


# -- literal readers: YDB's "Literal of <Type> type is expected for <OPTION>" ------------------


def _term_text(term: ast.Term) -> str:
    if isinstance(term, ast.Constant):
        return f"'{term.text}'" if term.kind == "string" else term.text
    if isinstance(term, ast.FunctionCall):
        args = ", ".join(
            term_text(a) if isinstance(a, ast.ColumnArg) else _term_text(a) for a in term.args
        )
        return f"{term.name}({args})"
    return repr(term)


def _choice(name: str, term: ast.Term, allowed: tuple[str, ...]) -> str:
    value = _string(name, term).upper()
    if value not in allowed:
        raise InvalidRequest(
            f"Invalid changefeed {name} '{_string(name, term)}': expected one of "
            f"{', '.join(allowed)}"
        )
    return value


def _string(name: str, term: ast.Term) -> str:
    if isinstance(term, ast.Constant) and term.kind == "string":
        return term.text
    raise InvalidRequest(f"Literal of String type is expected for {name}, got {_term_text(term)}")


def _bool(name: str, term: ast.Term | None) -> bool:
    if term is None:
        return False
    if isinstance(term, ast.Constant) and term.kind == "boolean":
        return term.text.lower() == "true"
    raise InvalidRequest(f"Literal of Bool type is expected for {name}, got {_term_text(term)}")


def _integer(name: str, term: ast.Term) -> int:
    if isinstance(term, ast.Constant) and term.kind == "integer":
        return int(term.text)
    raise InvalidRequest(f"Literal of integer type is expected for {name}, got {_term_text(term)}")


def _interval_ms(name: str, term: ast.Term) -> int:
    """A positive whole number of milliseconds from ``Interval('<ISO-8601 duration>')``."""
    if not (
        isinstance(term, ast.FunctionCall)
        and term.name.lower() == "interval"
        and len(term.args) == 1
        and isinstance(term.args[0], ast.Constant)
        and term.args[0].kind == "string"
    ):
        raise InvalidRequest(
            f"Literal of Interval type is expected for {name}, got {_term_text(term)}"
        )
    text = term.args[0].text
    ms = parse_iso_duration_ms(text)
    if ms is None:
        raise InvalidRequest(
            f"Invalid {name} Interval('{text}'): expected an ISO-8601 duration such as "
            f"'PT1S', 'PT24H' or 'P7D' (no years or months)"
        )
    if ms <= 0:
        raise InvalidRequest(f"Invalid {name} Interval('{text}'): must be at least 1 millisecond")
    return ms


__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_RETENTION_MS",
    "FORMATS",
    "MAX_PARTITIONS",
    "MAX_RETENTION_MS",
    "MODES",
    "FeedOptions",
    "Format",
    "Mode",
    "feed_options_from_texts",
    "iso_duration",
    "parse_feed_options",
    "parse_iso_duration_ms",
    "to_texts",
    "with_aws_region",
]
