"""The ``cqlcdc`` loggers on stderr: one line per event, as text or as JSON.

Text (``cqlcdc: ERROR: table ks.t stopped at ...``) is for a person at a terminal; JSON
(``--log-format json``: one object per line with ``ts``, ``level``, ``logger``,
``message``) is for a log shipper. A traceback, where a defect logs one, stays inside
the one line (JSON escapes its newlines; text indents nothing and keeps it last).

>>> configure("json")  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

FORMATS = ("text", "json")
TEXT_FORMAT = "cqlcdc: %(levelname)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``,
    ``logger``, ``message``, and ``exception`` when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        body: dict[str, object] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False)


def configure(fmt: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """Send the ``cqlcdc`` loggers (INFO and up) to ``stream`` (default stderr) in ``fmt``,
    replacing a handler an earlier call installed. Returns the handler."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    logger = logging.getLogger("cqlcdc")
    for old in [h for h in logger.handlers if getattr(h, "cqlcdc_handler", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.cqlcdc_handler = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler
