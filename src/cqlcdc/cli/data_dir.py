"""The ``--data-dir`` and ``--storage-option`` options every ``cqlcdc`` command shares.

``--data-dir`` names a local path or an object-store URI (``s3://bucket/prefix``);
``--storage-option KEY=VALUE`` (repeatable) sets the object store's endpoint, region or
credentials by delta-rs's names. Both become one :class:`~cqlcdc.location.Location`
before the command runs, so a URI of another scheme is refused up front, in one line,
instead of being taken for a relative local path.

>>> p = argparse.ArgumentParser(); add_data_dir_arguments(p)
>>> data_dir_location(p.parse_args(["--data-dir", "s3://b/d1"])).uri
's3://b/d1'
"""

from __future__ import annotations

import argparse
import os

from cqlcdc.location import Location, parse_storage_options

DEFAULT_DATA_DIR = "cqlcdc-data"
DATA_DIR_ENV = "CQLCDC_DATA_DIR"


def add_data_dir_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--data-dir`` and ``--storage-option`` to a command's parser."""
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="PATH_OR_URI",
        help=f"data directory: a local path or s3://bucket/prefix (default: ./{DEFAULT_DATA_DIR} "
        f"or ${DATA_DIR_ENV})",
    )
    p.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an object-store setting as delta-rs names it (AWS_ENDPOINT_URL, AWS_REGION, "
        "AWS_ACCESS_KEY_ID, ...); repeatable; the standard AWS environment fills the rest",
    )


def data_dir_location(args: argparse.Namespace) -> Location:
    """The Location ``--data-dir`` and ``--storage-option`` name.

    Raises:
        UnsupportedLocation: a URI of a scheme cqlcdc cannot store in, or a malformed
            ``--storage-option``.
    """
    where = args.data_dir or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return Location.of(where, parse_storage_options(args.storage_option))


def add_lease_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--lease-ttl`` to a command that owns its data directory while it runs."""
    p.add_argument(
        "--lease-ttl",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="how long the data directory's lease lives unrenewed: how long a killed owner "
        "keeps an s3:// data directory from another process (default: $CQLCDC_LEASE_TTL, "
        "else 30)",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a lease ttl is positive, not {text}")
    return value


__all__ = ["add_data_dir_arguments", "add_lease_argument", "data_dir_location"]
