"""``cqlcdc status``: what a data directory is doing, read from its files, while a server
may hold it: who holds it and since when, its tables with their sizes, the pipeline's
backlog and last batch, feeds with their consumers' lag and publishers, and a stopped table
or record with the ``cqlcdc recover`` command that resumes it. The directory may be local
or in an object store (``s3://``): every document is read through its ``Location`` (lease,
manifest, catalog, ingest listing, stopped tables, consumer offsets, publisher states,
Delta logs).

``--connect HOST:PORT`` asks a running server where its data directory is (its
``system.config``) and reads that. ``--format json`` prints one object (a stable shape for
scripts); ``--watch`` redraws the text every few seconds.

>>> report = status_report(Location.of("cqlcdc-data"))  # doctest: +SKIP
>>> report["healthy"]  # doctest: +SKIP
True
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from cqlcdc.cli.data_dir import add_data_dir_arguments
from cqlcdc.datadir.commit import MANIFEST_NAME, Manifest, open_table
from cqlcdc.datadir.ingest import list_ingest_files
from cqlcdc.datadir.lease import read_lease
from cqlcdc.directory_state import DirectoryState, ingest_backlog, read_state
from cqlcdc.errors import InvalidRequest
from cqlcdc.location import Location
from cqlcdc.schema.persist import CATALOG_FILE


@dataclass(frozen=True, slots=True)
class Holder:
    """The process that holds a data directory (or last held it and did not let go)."""

    pid: int
    alive: bool
    host: str
    command: str
    started_s: float | None  # the process's start (epoch s); None where /proc does not say
    lease: str  # the lease record as the refusal line names it


def data_dir_holder(data_dir: Location) -> Holder | None:
    """Who holds ``data_dir``: its lease record (``cqlcdc.datadir.lease``; the holder deletes
    it when it lets go). A record can outlive its holder (kill -9): on this host the pid
    decides, elsewhere the lease's expiry. None: no one holds it.

    The one place that knows how ownership is recorded.
    """
    record = read_lease(data_dir)
    if record is None:
        return None
    here = record.host == socket.gethostname()
    if here:
        alive = _alive(record.pid)
    else:  # another machine's: live until its expiry (a local-disk lease has none)
        alive = record.expires_at is None or _epoch_s(record.expires_at) > time.time()
    return Holder(
        pid=record.pid,
        alive=alive,
        host=record.host,
        command=_command(record.pid) if here and alive else "",
        started_s=(_started_s(record.pid) if here and alive else None)
        or _epoch_s(record.acquired_at),
        lease=record.describe(),
    )


def _epoch_s(text: str) -> float:
    """An ISO 8601 time of a lease record as epoch seconds."""
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def _started_s(pid: int) -> float | None:
    """When ``pid`` started (epoch seconds), from /proc (Linux); None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command, which may hold spaces
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _output_size(data_dir: Location, output: str, version: int | None) -> tuple[int, int]:
    """(stored records, bytes) of an output table at ``version`` (0, 0 if none yet)."""
    if version is None:
        return 0, 0
    actions = open_table(data_dir / "tables" / output, version).get_add_actions(flatten=True)
    records = sum(v or 0 for v in pa.table(actions).column("num_records").to_pylist())
    size = sum(v or 0 for v in pa.table(actions).column("size_bytes").to_pylist())
    return int(records), int(size)


def _modified_s(location: Location) -> float | None:
    """When a file was last written (epoch s; an object's upload time), None if absent."""
    info = location.filesystem.get_file_info(location.fs_path)
    return None if info.mtime is None else float(info.mtime.timestamp())


def status_report(
    data_dir: Location | str | os.PathLike[str], server: str | None = None
) -> dict[str, Any]:
    """The status of ``data_dir`` (a local path or an object-store Location) as one
    JSON-able object (``--format json`` prints it). Reads only: a server may hold it.

    Raises:
        InvalidRequest: ``data_dir`` is not a cqlcdc data directory.
    """
    data_dir = Location.of(data_dir)
    names = set(data_dir.list_names())
    if "ingest" not in names and CATALOG_FILE not in names:
        raise InvalidRequest(f"{data_dir} is not a cqlcdc data directory")
    now = time.time()
    manifest = Manifest.load(data_dir)
    state = read_state(data_dir, manifest=manifest)
    durable, files_behind = ingest_backlog(list_ingest_files(data_dir / "ingest"), manifest.max_seq)
    last_batch_s = _modified_s(data_dir / MANIFEST_NAME) if MANIFEST_NAME in names else None
    holder = data_dir_holder(data_dir)
    return {
        "data_dir": data_dir.uri,
        "server": server,
        "healthy": not state.stopped and state.failure is None,
        "holder": None
        if holder is None
        else {
            "pid": holder.pid,
            "alive": holder.alive,
            "host": holder.host,
            "command": holder.command,
            "started_s": holder.started_s,
            "lease": holder.lease,
            "uptime_s": None if holder.started_s is None else round(now - holder.started_s, 1),
        },
        "pipeline": {
            "batch_id": state.batch_id,
            "committed_seq": state.committed_seq,
            "durable_seq": durable,
            "backlog_seqs": max(durable - state.committed_seq, 0),
            "backlog_files": files_behind,
            "last_batch_s": last_batch_s if state.batch_id >= 0 else None,
        },
        "tables": _tables(data_dir, state, manifest),
        "feeds": [
            {
                "name": feed.name,
                "partitions": feed.partitions,
                "records": feed.records,
                "disabled": feed.disabled,
                "consumers": [
                    {"group": c.group, "committed": c.committed, "lag": c.lag}
                    for c in feed.consumers
                ],
                "publishers": [
                    {
                        "topic": p.topic,
                        "group": p.group,
                        "published": p.published,
                        "lag": p.lag,
                        "errors": p.errors,
                        "last_error": p.last_error,
                        "updated_s": p.updated_s,
                        "pid": p.pid,
                        "running": p.pid > 0 and _alive(p.pid),
                    }
                    for p in feed.publishers
                ],
            }
            for feed in state.feeds
        ],
        "stopped": [
            {
                "table": s.table,
                "seq": s.first_seq,
                "batch_id": s.batch_id,
                "error": s.error,
                "retry": f"cqlcdc recover --data-dir {data_dir} --retry-table {s.table}",
                "drop": f"cqlcdc recover --data-dir {data_dir} --skip-table {s.table}",
            }
            for s in state.stopped
        ],
        "failure": None
        if state.failure is None
        else {
            "batch_id": state.failure.batch_id,
            "seqs": state.failure.skip_argument(),
            "message": state.failure.message,
            "skip": f"cqlcdc recover --data-dir {data_dir} --skip {state.failure.skip_argument()}",
        },
    }


def _tables(data_dir: Location, state: DirectoryState, manifest: Manifest) -> list[dict[str, Any]]:
    out = []
    for table in state.tables:
        rows, size = _output_size(
            data_dir, f"base/{table.table_id}", _version(manifest, "base", table.table_id)
        )
        log_rows, log_size = _output_size(
            data_dir, f"log/{table.table_id}", _version(manifest, "log", table.table_id)
        )
        out.append(
            {
                "name": table.name,
                "stored_rows": rows,
                "bytes": size,
                "log_rows": log_rows,
                "log_bytes": log_size,
                "commits": table.commits,
                "stopped": table.stopped is not None,
            }
        )
    return out


def _version(manifest: Manifest, kind: str, table_id: str) -> int | None:
    return manifest.version_of(f"{kind}/{table_id}")


# -- text --------------------------------------------------------------------------------------


def _ago(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def format_text(report: dict[str, Any], now: float | None = None) -> str:
    """The report as lines a person reads (``cqlcdc status``'s default)."""
    now = time.time() if now is None else now
    lines = [f"data directory {report['data_dir']}"]
    holder = report["holder"]
    if report["server"]:
        lines.append(f"server: {report['server']}")
    if holder is None:
        lines.append("held by: no process (no server or session has it open)")
    elif not holder["alive"]:
        lines.append(
            f"held by: no process (pid {holder['pid']} held it and exited without letting "
            "go; the next process to open it takes it)"
        )
    else:
        since = f", up {_ago(holder['uptime_s'])}" if holder["uptime_s"] is not None else ""
        command = f": {holder['command']}" if holder["command"] else ""
        lines.append(f"held by: pid {holder['pid']} on {holder['host']}{since}{command}")
    pipe = report["pipeline"]
    last = (
        f"last batch {pipe['batch_id']} committed {_ago(now - pipe['last_batch_s'])} ago"
        if pipe["last_batch_s"] is not None
        else "no batch committed yet"
    )
    lines.append(
        f"pipeline: writes up to seq {pipe['committed_seq']:,} applied; backlog "
        f"{pipe['backlog_seqs']:,} seq(s) in {pipe['backlog_files']:,} ingest file(s); {last}"
    )
    lines.append("tables:" if report["tables"] else "tables: none")
    for t in report["tables"]:
        state = "  STOPPED" if t["stopped"] else ""
        lines.append(
            f"  {t['name']}: {t['stored_rows']:,} stored rows ({_bytes(t['bytes'])}), CDC log "
            f"{t['log_rows']:,} rows ({_bytes(t['log_bytes'])}){state}"
        )
    lines.append("feeds:" if report["feeds"] else "feeds: none")
    for f in report["feeds"]:
        disabled = ", disabled" if f["disabled"] else ""
        lines.append(
            f"  {f['name']}: {f['records']:,} records in {f['partitions']} partition(s){disabled}"
        )
        for c in f["consumers"]:
            lines.append(
                f"    consumer {c['group']}: committed {c['committed']:,}, lag {c['lag']:,}"
            )
        for p in f["publishers"]:
            running = "running" if p["running"] else "not running"
            error = f"; last error: {p['last_error']}" if p["last_error"] else ""
            lines.append(
                f"    publish to Kafka topic {p['topic']} ({running}, updated "
                f"{_ago(now - p['updated_s'])} ago): lag {p['lag']:,}, {p['errors']} failed "
                f"attempt(s){error}"
            )
    for s in report["stopped"]:
        lines.append(
            f"STOPPED: table {s['table']} at write seq={s['seq']} (batch {s['batch_id']}): "
            f"{s['error']}"
        )
        lines.append(
            f"  with the server stopped, apply its held writes again: {s['retry']}; or drop "
            f"them: {s['drop']}"
        )
    failure = report["failure"]
    if failure is not None:
        lines.append(
            f"STOPPED: the pipeline at batch {failure['batch_id']} (seq {failure['seqs']}): "
            f"{failure['message']}"
        )
        lines.append(f"  with the server stopped, go on without that write: {failure['skip']}")
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------------


def _served_data_dir(args: argparse.Namespace) -> tuple[Location, str]:
    """The data directory a running server reads (its ``system.config``), and its address."""
    from cqlcdc.remote.session import RemoteSession, parse_address

    host, port = parse_address(args.connect)
    password = args.password if args.password is not None else os.environ.get("CQLCDC_PASSWORD")
    session = RemoteSession(host, port, username=args.username, password=password)
    try:
        rows = session.execute(
            "SELECT value FROM system.config WHERE name = 'data_file_directories'"
        )
        values = [row[0] for row in rows]
    finally:
        session.close()
    if not values:
        raise InvalidRequest(f"the server at {host}:{port} does not say where its data is")
    directories = json.loads(values[0])
    data_dir = Location.of(directories[0])  # an object store's through the AWS environment
    if data_dir.is_local and not (data_dir.path / "ingest").is_dir():
        raise InvalidRequest(
            f"the server at {host}:{port} serves {data_dir}, which is not on this machine: "
            "run cqlcdc status there"
        )
    return data_dir, f"{host}:{port}"


def cmd_status(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the status once, or with ``--watch`` every few seconds until interrupted."""
    out = out if out is not None else sys.stdout
    if args.connect:
        data_dir, server = _served_data_dir(args)
    else:
        data_dir, server = args.data_dir, None
    while True:
        report = status_report(data_dir, server)
        if args.format == "json":
            text = json.dumps(report, ensure_ascii=False)
        else:
            text = format_text(report)
        if args.watch and args.format != "json" and out.isatty():
            out.write("\033[H\033[2J")  # redraw in place
        print(text, file=out, flush=True)
        if not args.watch:
            return 0
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0


def add_status_command(
    sub: Any, connect_arguments: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """``cqlcdc status`` and its options, on the main parser's subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="who holds a data directory, its tables, pipeline backlog, feeds and their "
        "consumers' lag, and a stopped table's recover command",
    )
    add_data_dir_arguments(p)
    connect_arguments(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="print it again every SECONDS (default 2), in place on a terminal, until interrupted",
    )
    p.set_defaults(func=cmd_status)
    return p
