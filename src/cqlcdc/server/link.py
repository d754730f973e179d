"""The link between a protocol worker and the coordinator's process (``serve --workers``).

A socket pair the coordinator makes for each worker it starts, so nothing else can reach
it. Messages are tuples (``kind, ...``: see ``worker_pool`` and ``worker_process``) and travel in
batches: everything queued while the previous batch was being sent goes as one pickled
list behind a 4-byte length, so 64 writes in flight cost a few system calls and one
pickle each way, not 64. Both ends are this package in processes of one data directory's
server; nothing from a client is ever unpickled (frames travel as bytes).
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
from typing import Any

LENGTH = struct.Struct("!I")

Message = tuple[Any, ...]


def pack(messages: list[Message]) -> bytes:
    """One batch as it goes on the link."""
    body = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(body)) + body


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    chunks: list[bytes] = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_batch(sock: socket.socket) -> list[Message] | None:
    """The next batch from a blocking socket (None: the other end is gone)."""
    head = _read_exactly(sock, LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(sock, LENGTH.unpack(head)[0])
    if body is None:
        return None
    batch: list[Message] = pickle.loads(body)
    return batch


async def read_batch_async(reader: asyncio.StreamReader) -> list[Message] | None:
    """The next batch from an asyncio stream (None: the other end is gone)."""
    try:
        head = await reader.readexactly(LENGTH.size)
        body = await reader.readexactly(LENGTH.unpack(head)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    batch: list[Message] = pickle.loads(body)
    return batch


class Outbox:
    """Messages to one blocking socket, in batches: the thread that queues a message when
    no send is under way sends it, with whatever others queue meanwhile; a thread that
    queues one during a send leaves it to that sender. So a lone reply costs no thread
    hand-off, and many go in few system calls. The other end never blocks its reading
    (the worker's event loop), so a send always finishes."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._queued: list[Message] = []
        self._cond = threading.Condition()
        self._sending = False
        self._closed = False

    def put(self, message: Message) -> None:
        with self._cond:
            if self._closed:
                return
            self._queued.append(message)
            if self._sending:
                return
            self._sending = True
        self._send_queued()

    def close(self) -> None:
        """Wait for a send under way, then take no more."""
        with self._cond:
            self._closed = True
            while self._sending:
                self._cond.wait()

    def _send_queued(self) -> None:
        while True:
            with self._cond:
                batch, self._queued = self._queued, []
                if not batch:
                    self._sending = False
                    self._cond.notify_all()
                    return
            try:
                self._sock.sendall(pack(batch))
            except OSError:  # the worker is gone: its replies have no one to go to
                with self._cond:
                    self._closed = True
                    self._queued = []
                    self._sending = False
                    self._cond.notify_all()
                return


__all__ = ["Message", "Outbox", "pack", "read_batch", "read_batch_async"]
