"""``cqlcdc run FILE.cql`` (like ``cqlsh -f``) and the interactive ``cqlcdc shell``: statements
printed as cqlsh prints them, or as JSON lines.

``--format json`` prints one JSON object per statement; that shape is a stable contract:

    {"statement": n, "cql": "...", "ok": true, "columns": [...], "rows": [[...], ...]}
    {"statement": n, "cql": "...", "ok": false,
     "error": {"code": 8704, "class": "InvalidRequest", "message": "..."}}
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from cqlcdc.cli.sessions import open_session
from cqlcdc.cql import ast, parse_statement, split_statements
from cqlcdc.errors import CqlError, CqlSyntaxError

_ERROR_KIND = {
    0x2000: "Syntax error in CQL query",
    0x2200: "Invalid query",
    0x2300: "Invalid configuration in query",
    0x2400: "Query invalid because of configuration issue",
    0x0000: "Server error",
}


def cqlsh_text(value: Any, ctype: Any) -> str:
    """A cell as cqlsh prints it (``null`` for CQL null)."""
    if value is None:
        return "null"
    if ctype is None:
        return str(value)
    return str(ctype.to_cqlsh(value))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[str | None]]) -> str:
    """cqlsh's table: headers left-aligned, values right-aligned, then ``(N rows)``."""
    cells = [["null" if c is None else c for c in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [" " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("-" + "-+-".join("-" * w for w in widths) + "-")
    for row in cells:
        lines.append(" " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    lines.append("")
    lines.append(f"({len(rows)} rows)")
    return "\n".join(lines)


def error_json(err: CqlError) -> dict[str, Any]:
    return {"code": err.code, "class": err.class_name, "message": err.message}


def error_text(err: CqlError, where: str) -> str:
    kind = _ERROR_KIND.get(err.code, err.class_name)
    return (
        f"{where}:{err.class_name}: Error from server: code={err.code:04x} [{kind}] "
        f'message="{err.message}"'
    )


class Runner:
    """Runs statements against a session and prints each result or error."""

    def __init__(self, session: Any, fmt: str, out: TextIO, err: TextIO) -> None:
        self.session = session
        self.fmt = fmt
        self.out = out
        self.err = err
        self.count = 0
        self.failures = 0

    def run_text(self, text: str, source: str) -> None:
        """Run a script. Consecutive writes go to the engine as one group (one durable
        append, one wait), which keeps their order and saves a commit round trip each."""
        pending: list[tuple[str, str, ast.Statement]] = []
        for piece in split_statements(text):
            where = f"{source}:{piece.line}"
            try:
                stmt = parse_statement(piece.text)
            except CqlError as e:
                self._flush(pending)
                self.count += 1
                self._report(e, piece.text, where)
                continue
            if isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
                pending.append((piece.text, where, stmt))
                continue
            self._flush(pending)
            self.run_one(piece.text, where, stmt)
        self._flush(pending)

    def _flush(self, pending: list[tuple[str, str, ast.Statement]]) -> None:
        if not pending:
            return
        group = list(pending)
        pending.clear()
        try:
            results = self.session.execute_many([stmt for _, _, stmt in group])
        except CqlError as e:
            results = [e] * len(group)
        for (cql, where, _), result in zip(group, results, strict=True):
            self.count += 1
            if isinstance(result, CqlError):
                self._report(result, cql, where)
            else:
                self._print_result(cql, result)

    def run_one(self, cql: str, where: str, stmt: ast.Statement | None = None) -> None:
        """Run one statement and print its result or error."""
        self.count += 1
        try:
            result = self.session.execute(stmt if stmt is not None else cql)
        except CqlError as e:
            self._report(e, cql, where)
            return
        except Exception as e:  # an engine failure: report it as a server error, keep going
            self._report(CqlError(f"{type(e).__name__}: {e}"), cql, where)
            return
        self._print_result(cql, result)

    def _report(self, err: CqlError, cql: str, where: str) -> None:
        self.failures += 1
        if self.fmt == "json":
            self._json({"ok": False, "error": error_json(err)}, cql)
        else:
            print(error_text(err, where), file=self.err, flush=True)

    def _json(self, body: dict[str, Any], cql: str) -> None:
        obj = {"statement": self.count, "cql": cql, **body}
        print(json.dumps(obj, ensure_ascii=False), file=self.out, flush=True)

    def _print_result(self, cql: str, result: Any) -> None:
        if result.describe is not None:
            if self.fmt == "json":
                self._json({"ok": True, "columns": ["describe"], "rows": [[result.describe]]}, cql)
            else:
                print("\n" + result.describe + "\n", file=self.out, flush=True)
            return
        if self.fmt == "json":
            rows = [
                [
                    None if v is None else cqlsh_text(v, t)
                    for v, t in zip(r, result.column_types, strict=True)
                ]
                for r in result
            ]
            self._json({"ok": True, "columns": result.column_names, "rows": rows}, cql)
            return
        if not result.column_names:
            return
        rows = [
            [cqlsh_text(v, t) for v, t in zip(r, result.column_types, strict=True)] for r in result
        ]
        print("\n" + format_table(result.column_names, rows) + "\n", file=self.out, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as e:
        print(f"cqlcdc: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 2
    session = open_session(args)
    runner = Runner(session, args.format, sys.stdout, sys.stderr)
    try:
        runner.run_text(text, str(path))
    finally:
        session.close()
    return 0 if runner.failures == 0 else 1


def cmd_shell(args: argparse.Namespace) -> int:
    session = open_session(args)
    runner = Runner(session, args.format, sys.stdout, sys.stdout)
    buffer = ""
    interactive = sys.stdin.isatty()
    try:
        while True:
            ks = session.keyspace
            prompt = ("cqlsh:" + ks + "> " if ks else "cqlsh> ") if not buffer else "   ... "
            try:
                line = input(prompt) if interactive else sys.stdin.readline()
            except EOFError:
                break
            if not interactive and line == "":
                break
            if not buffer and line.strip().lower() in ("exit", "quit", "exit;", "quit;"):
                break
            buffer += line + ("\n" if interactive else "")
            try:
                pieces = split_statements(buffer)
            except CqlSyntaxError:
                pieces = []
            complete = buffer.rstrip().endswith(";") or buffer.strip().upper().endswith(
                "APPLY BATCH"
            )
            if pieces and complete:
                runner.run_text(buffer, "<stdin>")
                buffer = ""
        if buffer.strip():
            runner.run_text(buffer, "<stdin>")
    finally:
        session.close()
    return 0 if runner.failures == 0 else 1
