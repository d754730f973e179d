"""An S3 proxy on loopback: a fixed latency per request, and a count of requests by kind.

Moto answers in about a millisecond; S3 takes tens. Put this proxy between cqlcdc and moto
(``AWS_ENDPOINT_URL`` = the proxy) to see what S3's latency does to acknowledgements, and
read how many object-store requests of each kind (PUT, GET, HEAD, LIST, DELETE, POST) a
workload made: S3 bills per request. Path-style addressing (what every client uses with an
explicit endpoint on an IP address) is assumed: the first path segment is the bucket.

>>> with S3Proxy("http://127.0.0.1:5000", latency_s=0.02) as proxy:  # doctest: +SKIP
...     os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
...     proxy.counts()  # {"PUT": 0, "GET": 0, ...}

As a command (prints the counts every ``--every`` seconds and at exit)::

    python benchmarks/s3_proxy.py --upstream http://127.0.0.1:5000 --latency-ms 20 --port 5001
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import ClassVar

CONTROL = "/_proxy/"  # the proxy's own requests (counts, reset): no bucket is named so
KINDS = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
# a listing is a GET of the bucket itself with one of these (ListObjects v1 and v2)
LIST_QUERY = {"list-type", "prefix", "delimiter", "continuation-token", "marker"}
# headers that belong to one hop, never forwarded (RFC 9110 section 7.6.1)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
}


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
# ids: long hex runs with a letter (a run of digits alone is a number)
_HEX = re.compile(r"(?<![0-9a-z])(?=[0-9]*[a-f])[0-9a-f]{16,}(?![0-9a-z])", re.I)
_NUMBER = re.compile(r"\d{3,}")  # seqs, versions, batch ids; not the 1 of "d1"


def object_shape(kind: str, target: str) -> str:
    """Which object (or listing) a request went to, with its numbers and ids folded, so
    requests to objects of one sort count together: ``PUT d1/ingest/N.arrow``.

    >>> object_shape("PUT", "/b/d1/tables/ks/w/_delta_log/00000000000000000007.json")
    'PUT d1/tables/ks/w/_delta_log/N.json'
    >>> object_shape("LIST", "/b?list-type=2&prefix=d1%2Fingest%2F")
    'LIST d1/ingest/'
    """
    url = urllib.parse.urlsplit(target)
    key = urllib.parse.unquote(url.path.lstrip("/").partition("/")[2])
    if kind == "LIST":
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        key = (query.get("prefix") or [""])[0]
    elif url.query and not key:
        key = "?" + url.query.split("=")[0]
    folded = _NUMBER.sub("N", _HEX.sub("H", _UUID.sub("UUID", key)))
    return f"{kind} {folded}"


def request_kind(method: str, target: str) -> str:
    """The billing kind of one S3 request: LIST is a GET of a bucket (no key) that lists it.

    >>> request_kind("GET", "/bucket?list-type=2&prefix=d/")
    'LIST'
    >>> request_kind("GET", "/bucket/d/_delta_log/00000000000000000000.json")
    'GET'
    """
    url = urllib.parse.urlsplit(target)
    key = url.path.lstrip("/").partition("/")[2]
    if method == "GET" and not key:
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if not query or LIST_QUERY & set(query):
            return "LIST"
    return method if method in KINDS else "OTHER"


class S3Proxy:
    """A threaded HTTP proxy in front of ``upstream`` (an S3 API endpoint), in a process of
    its own.

    Its own process, not a thread of the caller's: delta-rs's Python bindings hold the GIL
    while their Rust runtime waits on S3 (``DeltaTable.is_deltatable``, ``write_deltalake``,
    ...), so a proxy thread in the same interpreter never runs to answer, and the request
    hangs until its timeout. The counts are read from the proxy's process over its control
    path (``/_proxy/...``: a bucket name never holds ``_``, so no S3 request is taken for it).

    Args:
        upstream: the S3 server, e.g. ``http://127.0.0.1:5000``.
        latency_s: added to every request before it is forwarded (per request, so requests
            in flight at once each wait their own, as with S3).
        port: where to listen on 127.0.0.1 (0: a free port; see ``endpoint``).
    """

    def __init__(self, upstream: str, latency_s: float = 0.02, port: int = 0) -> None:
        _upstream_address(upstream)  # refused here, not in the child
        self.upstream = upstream
        self.latency_s = latency_s
        self.port = port
        self._proc: subprocess.Popen[str] | None = None
        self._endpoint: str | None = None

    @property
    def endpoint(self) -> str:
        """The proxy's URL (what ``AWS_ENDPOINT_URL`` should say)."""
        if self._endpoint is None:
            raise RuntimeError("the proxy is not started")
        return self._endpoint

    def counts(self) -> dict[str, int]:
        """Requests forwarded since the start or the last ``reset``, by kind."""
        return dict(self._control("GET", "counts")["counts"])

    def bytes_sent(self) -> dict[str, int]:
        """Request body bytes forwarded, by kind (what PUTs and POSTs uploaded)."""
        return dict(self._control("GET", "counts")["bytes"])

    def objects(self) -> dict[str, int]:
        """Requests since the start or the last ``reset`` by object sort (``object_shape``:
        ``"PUT d1/ingest/N.arrow"``), most first."""
        return dict(self._control("GET", "counts")["objects"])

    def reset(self) -> dict[str, int]:
        """Zero the counts; return them as they were."""
        return dict(self._control("POST", "reset")["counts"])

    def reset_all(self) -> dict[str, dict[str, int]]:
        """Zero the counts; return them as they were, with ``bytes`` and ``objects``."""
        return self._control("POST", "reset")

    def start(self) -> S3Proxy:
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--upstream",
            self.upstream,
            "--latency-ms",
            repr(self.latency_s * 1000),
            "--port",
            str(self.port),
        ]
        self._proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()  # "proxy http://127.0.0.1:PORT -> ..."
        if not first.startswith("proxy http://"):
            self.stop()
            raise RuntimeError(f"the S3 proxy did not start: {first!r}")
        self._endpoint = first.split()[1]
        return self

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc = None

    def __enter__(self) -> S3Proxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _control(self, method: str, what: str) -> dict[str, dict[str, int]]:
        host, port = _upstream_address(self.endpoint)
        connection = http.client.HTTPConnection(host, port, timeout=30)
        try:
            connection.request(method, f"{CONTROL}{what}", body=b"" if method == "POST" else None)
            answer = connection.getresponse()
            body = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"the S3 proxy's {what}: {answer.status} {body[:200]!r}")
            result: dict[str, dict[str, int]] = json.loads(body)
            return result
        finally:
            connection.close()


def _upstream_address(url_text: str) -> tuple[str, int]:
    url = urllib.parse.urlsplit(url_text)
    if url.scheme != "http" or url.hostname is None:
        raise ValueError(f"upstream must be http://host:port, not {url_text!r}")
    return url.hostname, url.port or 80


class _QuietServer(ThreadingHTTPServer):
    """A client that closes its connection before the answer is written (a reader that
    wanted only part of an object) is not an error of the proxy's: no traceback for it."""

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class _ProxyServer:
    """The proxy itself (in the proxy's process): the listening server and the counts."""

    def __init__(self, upstream: str, latency_s: float, port: int) -> None:
        self.upstream = _upstream_address(upstream)
        self.latency_s = latency_s
        self._counts: Counter[str] = Counter()
        self._bytes: Counter[str] = Counter()
        self._objects: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self.server.daemon_threads = True

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def snapshot(self, reset: bool = False) -> dict[str, dict[str, int]]:
        with self._lock:
            kinds = (*KINDS, "OTHER")
            state = {
                "counts": {kind: self._counts[kind] for kind in kinds},
                "bytes": {kind: self._bytes[kind] for kind in kinds},
                "objects": dict(self._objects.most_common()),
            }
            if reset:
                self._counts.clear()
                self._bytes.clear()
                self._objects.clear()
            return state

    def _count(self, kind: str, target: str, body_bytes: int) -> None:
        shape = object_shape(kind, target)
        with self._lock:
            self._counts[kind] += 1
            self._bytes[kind] += body_bytes
            self._objects[shape] += 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(_Forwarder):
            owner: ClassVar[_ProxyServer] = proxy

        return Handler


class _Forwarder(BaseHTTPRequestHandler):
    """Forwards one keep-alive client connection's requests over one upstream connection."""

    owner: ClassVar[_ProxyServer]
    protocol_version = "HTTP/1.1"  # keep-alive, and ``Expect: 100-continue`` answered here
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would drown a benchmark's output

    def do_GET(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self) -> None:
        owner = self.owner
        body = self._read_body()
        if self.path.startswith(CONTROL):
            self._answer_control()
            return
        kind = request_kind(self.command, self.path)
        time.sleep(owner.latency_s)  # the injected per-request latency, before S3 "answers"
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        try:
            status, reason, reply_headers, reply = self._exchange(headers, body)
        except (OSError, http.client.HTTPException) as e:
            self.send_error(502, f"upstream: {e}")
            return
        owner._count(kind, self.path, len(body))
        # the upstream's own Date and Server, not a second pair of the proxy's (a client
        # that reads the store's clock from Date would get two dates joined by a comma)
        self.log_request(status)
        self.send_response_only(status, reason)
        for key, value in reply_headers:
            if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        if self.command == "HEAD":  # the object's length, and no body
            length = dict((k.lower(), v) for k, v in reply_headers).get("content-length")
            if length is not None:
                self.send_header("Content-Length", length)
        else:
            self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    def _answer_control(self) -> None:
        """The counts (``GET /_proxy/counts``), or the counts then zeroed (``POST
        /_proxy/reset``), as JSON; never forwarded nor counted."""
        what = self.path[len(CONTROL) :]
        if (self.command, what) not in (("GET", "counts"), ("POST", "reset")):
            self.send_error(404, f"no control {self.command} {what}")
            return
        reply = json.dumps(self.owner.snapshot(reset=what == "reset")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def _exchange(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """One request upstream over this connection's keep-alive connection (reopened once
        if the server closed it meanwhile)."""
        fresh = self._upstream is None
        if self._upstream is None:
            self._upstream = http.client.HTTPConnection(*self.owner.upstream, timeout=120)
        try:
            return _send(self._upstream, self.command, self.path, headers, body)
        except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
            self._upstream.close()
            self._upstream = None
            if fresh:
                raise
        self._upstream = http.client.HTTPConnection(*self.owner.upstream, timeout=120)
        return _send(self._upstream, self.command, self.path, headers, body)

    def finish(self) -> None:
        super().finish()
        if self._upstream is not None:
            self._upstream.close()


def _send(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes,
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    connection.request(method, target, body=body, headers=headers)
    answer = connection.getresponse()
    reply = answer.read()
    return answer.status, answer.reason, answer.getheaders(), reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the S3 server, http://host:port")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--every", type=float, default=0, help="print counts every N s")
    args = parser.parse_args()
    proxy = _ProxyServer(args.upstream, latency_s=args.latency_ms / 1000, port=args.port)
    # SIGTERM (``S3Proxy.stop``) ends it as Ctrl-C does: the counts printed, then exit
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    thread = threading.Thread(target=proxy.server.serve_forever, name="s3-proxy", daemon=True)
    thread.start()
    print(f"proxy {proxy.endpoint} -> {args.upstream}, +{args.latency_ms:g} ms", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(args.every or 3600)
            if args.every:
                print(json.dumps(proxy.snapshot()["counts"]), flush=True)
    proxy.server.shutdown()
    proxy.server.server_close()
    print(json.dumps(proxy.snapshot()["counts"]), flush=True)


if __name__ == "__main__":
    main()
