"""Where a data directory lives: a local path or an object-store URI (``s3://bucket/prefix``).

Everything durable of a data directory (the ingest log, the Delta tables, the manifest, the
catalog, roles, feed offsets, the stop and failure records) is read and written through a
:class:`Location`, so one engine serves a laptop's disk and an object store alike, and an
executor on another machine reaches the same objects as the driver. Files go through
``pyarrow.fs``; Delta tables through delta-rs, which takes :meth:`Location.delta_uri` and
:meth:`Location.delta_options`.

A Location is a small frozen value (its URI and the storage options as given), so it pickles
into Spark tasks; each process builds its own filesystem client from it, once.

>>> Location.of("/tmp/d").child("ingest").uri
'/tmp/d/ingest'
>>> Location.of("s3://bucket/prefix/").child("manifest.json").uri
's3://bucket/prefix/manifest.json'
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

# the object stores a data directory may live in (the scheme of its URI)
OBJECT_STORE_SCHEMES = ("s3",)
# delta-rs's names for the S3 settings, and the pyarrow S3FileSystem argument each one sets
_S3_OPTION_KEYS = {
    "aws_endpoint_url": "endpoint",
    "aws_endpoint": "endpoint",
    "endpoint": "endpoint",
    "aws_region": "region",
    "region": "region",
    "aws_access_key_id": "access_key",
    "access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "session_token": "session_token",
    "aws_allow_http": "allow_http",
    "allow_http": "allow_http",
}


class UnsupportedLocation(ValueError):
    """A data directory named by a URI whose scheme cqlcdc cannot store in."""


def parse_storage_options(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--storage-option``) as a dict; a pair without ``=`` is refused."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UnsupportedLocation(f"--storage-option takes KEY=VALUE, not {pair!r}")
        options[key.strip()] = value
    return options


@dataclass(frozen=True, slots=True)
class Location:
    """A data directory, or a file or directory inside one.

    Attributes:
        uri: an absolute local path (``/var/lib/cqlcdc``), or ``s3://bucket/key/prefix``
            without a trailing slash.
        options: storage options as delta-rs names them (``AWS_ENDPOINT_URL``,
            ``AWS_REGION``, ...), sorted pairs; the standard AWS environment fills the rest.
    """

    uri: str
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(
        where: Location | str | os.PathLike[str], options: Mapping[str, str] | None = None
    ) -> Location:
        """The Location a ``--data-dir`` value names: a local path (relative ones resolved
        against the working directory) or ``s3://bucket/prefix``.

        Raises:
            UnsupportedLocation: a URI of another scheme, or an ``s3://`` URI without a bucket.
        """
        if isinstance(where, Location):
            if options:
                return Location(
                    where.uri, tuple(sorted({**dict(where.options), **options}.items()))
                )
            return where
        text = os.fspath(where)
        opts = tuple(sorted((options or {}).items()))
        if "://" in text:
            parsed = urlparse(text)
            scheme = parsed.scheme.lower()
            if scheme == "file":
                return Location(str(Path(parsed.path).resolve()), opts)
            if scheme in ("s3", "s3a"):
                if not parsed.netloc:
                    raise UnsupportedLocation(f"Data directory {text!r} names no bucket")
                key = parsed.path.strip("/")
                uri = f"s3://{parsed.netloc}" + (f"/{key}" if key else "")
                return Location(uri, _with_environment(opts))
            raise UnsupportedLocation(
                f"Data directory {text!r}: scheme {parsed.scheme!r} is not supported "
                f"(a local path or s3://bucket/prefix)"
            )
        return Location(str(Path(text).resolve()), opts)

    # --- naming ---------------------------------------------------------------------------

    @property
    def scheme(self) -> str:
        """``file`` for a local path, else the URI's scheme (``s3``)."""
        return "file" if self.uri.startswith("/") else self.uri.split("://", 1)[0]

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def path(self) -> Path:
        """The local path (only for a local Location: an object has none)."""
        if not self.is_local:
            raise UnsupportedLocation(f"{self.uri} is not a local path")
        return Path(self.uri)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        head = self.uri.rstrip("/").rsplit("/", 1)[0]
        return Location(head or "/", self.options)

    def child(self, *parts: str) -> Location:
        """The Location of ``parts`` under this one (``a/b`` may be given as one part)."""
        uri = self.uri.rstrip("/")
        for part in parts:
            uri = f"{uri}/{part.strip('/')}"
        return Location(uri, self.options)

    def __truediv__(self, part: str) -> Location:
        return self.child(part)

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        """A local Location is a path-like (``open``, ``Path``); an object one is not."""
        return str(self.path)

    # --- the filesystem -------------------------------------------------------------------

    @property
    def filesystem(self) -> pafs.FileSystem:
        """This process's pyarrow filesystem client for this Location's store (one per store
        and options, built on first use)."""
        if self.is_local:
            return _local_filesystem()
        bucket = self.uri.split("://", 1)[1].split("/", 1)[0]
        return _object_filesystem(self.scheme, bucket, self.options)

    @property
    def fs_path(self) -> str:
        """The path ``filesystem`` takes: the local path, or ``bucket/key``."""
        return self.uri if self.is_local else self.uri.split("://", 1)[1]

    def read_bytes(self) -> bytes:
        """The whole file. Raises FileNotFoundError if there is none."""
        if self.is_local:
            return self.path.read_bytes()
        with self.filesystem.open_input_stream(self.fs_path) as stream:
            return bytes(stream.read())

    def read_text(self) -> str | None:
        """The file as UTF-8 text, or None when there is none."""
        try:
            return self.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None

    def write_atomically(self, data: bytes | str | pa.Buffer, mode: int = 0o644) -> None:
        """Replace the file with ``data`` so that a crash leaves the old or the new one, and
        the new one is durable when this returns: on a local disk a temp file, fsync, rename
        and fsync of the directory; in an object store one PUT (atomic by the store).
        ``mode``: the local file's permissions (0o600 for secrets such as password hashes;
        an object's access is the bucket's policy)."""
        body = data.encode("utf-8") if isinstance(data, str) else data
        if self.is_local:
            path = self.path
            tmp = path.with_name(path.name + ".tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
                try:
                    os.fchmod(fd, mode)  # a temp file left by a crash keeps its old mode
                    view = memoryview(body)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)  # a failed write leaves the old file, nothing else
                raise
            fsync_dir(path.parent)
            return
        with self.filesystem.open_output_stream(self.fs_path) as stream:
            stream.write(body)

    def open_input(self) -> pa.NativeFile:
        """A random-access reader (Parquet footers are read from the end)."""
        return self.filesystem.open_input_file(self.fs_path)

    def exists(self) -> bool:
        if self.is_local:
            return os.path.exists(self.uri)
        info = self.filesystem.get_file_info(self.fs_path)
        return bool(info.type != pafs.FileType.NotFound)

    def is_file(self) -> bool:
        if self.is_local:
            return os.path.isfile(self.uri)
        return bool(self.filesystem.get_file_info(self.fs_path).type == pafs.FileType.File)

    def delete(self) -> None:
        """Delete the file; a missing one is not an error."""
        if self.is_local:
            Path(self.uri).unlink(missing_ok=True)
            return
        delete_objects([self])

    def makedirs(self) -> None:
        """Create the directory and its parents (an object store has no directories: no-op)."""
        if self.is_local:
            os.makedirs(self.uri, exist_ok=True)

    def list_names(self) -> list[str]:
        """The names of the entries directly under this directory, sorted (none if missing).
        One LIST request in an object store."""
        if self.is_local:
            try:
                return sorted(os.listdir(self.uri))
            except FileNotFoundError:
                return []
        selector = pafs.FileSelector(self.fs_path, allow_not_found=True, recursive=False)
        infos = self.filesystem.get_file_info(selector)
        return sorted(info.base_name for info in infos)

    # --- Delta tables ---------------------------------------------------------------------

    @property
    def delta_uri(self) -> str:
        """The table URI delta-rs takes."""
        return self.uri

    def delta_options(self) -> dict[str, str] | None:
        """The storage options delta-rs takes for this store: the given ones, the endpoint
        and region from the environment, and conditional puts (``aws_conditional_put``) so
        that concurrent commits to one table are safe on S3 without a lock service."""
        if self.is_local:
            return None
        options = dict(self.options)
        lowered = {key.lower() for key in options}
        endpoint = _setting(self.options, "endpoint") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "aws_endpoint_url" not in lowered:
            options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint and endpoint.startswith("http://") and "aws_allow_http" not in lowered:
            options["AWS_ALLOW_HTTP"] = "true"
        region = _setting(self.options, "region") or _env_region()
        if region and "aws_region" not in lowered:
            options["AWS_REGION"] = region
        if "aws_conditional_put" not in lowered:
            options["aws_conditional_put"] = "etag"
        return options


_CLIENT_LOCK = threading.Lock()
# delta-rs's names for the credentials (Location.delta_options() adds endpoint and region)
_CREDENTIALS = {
    "aws_access_key_id": "aws_access_key_id",
    "access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "session_token": "aws_session_token",
}


def s3_client(options: dict[str, str], timeout_s: float = 30.0) -> Any:
    """A boto3 S3 client for these storage options (one per options and timeout)."""
    return _cached_s3_client(tuple(sorted(options.items())), timeout_s)


@functools.cache
def _cached_s3_client(options: tuple[tuple[str, str], ...], timeout_s: float) -> Any:
    """A boto3 S3 client for these storage options (pyarrow.fs has no conditional writes):
    endpoint, region and credentials from the options, else the standard AWS environment
    and profiles. Its timeouts are short so that a renewal cannot hang past the lease."""
    import boto3
    from botocore.config import Config

    lowered = {key.lower(): value for key, value in options}
    kwargs: dict[str, Any] = {}
    endpoint = lowered.get("aws_endpoint_url") or lowered.get("aws_endpoint")
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    region = lowered.get("aws_region") or lowered.get("region")
    if region:
        kwargs["region_name"] = region
    for key, value in lowered.items():
        if key in _CREDENTIALS:
            kwargs[_CREDENTIALS[key]] = value
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"total_max_attempts": 1},
    )
    with _CLIENT_LOCK:  # boto3's default session is not thread-safe; its clients are
        return boto3.session.Session().client("s3", config=config, **kwargs)


def delete_objects(locations: list[Location]) -> None:
    """Delete files, missing ones included. In an object store one DeleteObjects request
    per 1,000 keys of a bucket (pyarrow deletes one by one, and after each puts back an
    empty marker object for the "directory": two writes per file)."""
    local = [loc for loc in locations if loc.is_local]
    for loc in local:
        loc.delete()
    by_bucket: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
    for loc in locations:
        if not loc.is_local:
            bucket, _, key = loc.fs_path.partition("/")
            by_bucket.setdefault((bucket, loc.options), []).append(key)
    for (bucket, options), keys in by_bucket.items():
        client = s3_client(dict(options))
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _with_environment(options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The options with the endpoint and region this process's environment names, where the
    options do not: a Location travels to executors on other machines, which must reach the
    same store (credentials stay with each machine's own environment or profile)."""
    merged = dict(options)
    if _setting(options, "endpoint") is None and os.environ.get("AWS_ENDPOINT_URL"):
        merged["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"]
    if _setting(options, "region") is None and _env_region():
        merged["AWS_REGION"] = str(_env_region())
    return tuple(sorted(merged.items()))


def _setting(options: tuple[tuple[str, str], ...], name: str) -> str | None:
    for key, value in options:
        if _S3_OPTION_KEYS.get(key.lower()) == name:
            return value
    return None


def _env_region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


@functools.cache
def _local_filesystem() -> pafs.LocalFileSystem:
    return pafs.LocalFileSystem()


_S3_LOCK = threading.Lock()


@functools.cache
def _object_filesystem(
    scheme: str, bucket: str, options: tuple[tuple[str, str], ...]
) -> pafs.FileSystem:
    """pyarrow's client for one bucket. Built from the URI (``FileSystem.from_uri`` honours
    ``AWS_ENDPOINT_URL`` and the AWS profiles; a bare ``S3FileSystem()`` ignores the
    endpoint variable), then with the explicit options where any are given; opens are
    delayed, so that a small object is written with one PUT. pyarrow's S3 must
    be finalized before the interpreter exits, or the process aborts at exit."""
    if scheme not in OBJECT_STORE_SCHEMES:
        raise UnsupportedLocation(f"scheme {scheme!r} is not supported")
    with _S3_LOCK:
        _finalize_s3_at_exit()
    settings = {
        target: value for key, value in options if (target := _S3_OPTION_KEYS.get(key.lower()))
    }
    if not settings:
        fs, _ = pafs.FileSystem.from_uri(f"s3://{bucket}?allow_delayed_open=true")
        return fs
    endpoint = settings.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
    # a delayed open: a small file is one PUT when it is closed, not a multipart upload's
    # three requests (create, part, complete) from the open on
    kwargs: dict[str, object] = {"allow_delayed_open": True}
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
    if settings.get("allow_http", "").lower() == "true":
        kwargs["scheme"] = "http"
    region = settings.get("region") or _env_region()
    if region:
        kwargs["region"] = region
    if "access_key" in settings:
        kwargs["access_key"] = settings["access_key"]
        kwargs["secret_key"] = settings.get("secret_key", "")
        if "session_token" in settings:
            kwargs["session_token"] = settings["session_token"]
    return pafs.S3FileSystem(**kwargs)


@functools.cache
def _finalize_s3_at_exit() -> None:
    atexit.register(pafs.finalize_s3)


__all__ = [
    "OBJECT_STORE_SCHEMES",
    "Location",
    "UnsupportedLocation",
    "delete_objects",
    "fsync_dir",
    "parse_storage_options",
    "s3_client",
]
