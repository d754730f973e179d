"""The server-wide budget of request bodies in memory: received, being received, or running.

A frame header announces its body's length before the body arrives, so one client could
make the server buffer 256 MiB per connection, and a few hundred connections far more than
the machine has. Every connection reserves a frame's announced length here before it reads
the body, and gives it back once the request has run; a connection that finds the budget
spent stops reading (TCP backpressure) until other requests finish. The event loop's
thread owns it (no locks).

>>> budget = BodyBudget(100)
>>> budget.charge(60); budget.fits(50), budget.fits(40)
(False, True)
"""

from __future__ import annotations

import asyncio


class BodyBudget:
    """Bytes of request bodies the server holds at once, across every connection.

    Args:
        limit_bytes: the most held at once. A single body larger than the whole budget is
            still taken, once nothing else is held, so no request waits for ever.
    """

    def __init__(self, limit_bytes: int) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"a body budget must be positive, not {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self.peak_bytes = 0
        self._waiters: list[asyncio.Future[None]] = []

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes may be held now."""
        return self.used_bytes == 0 or self.used_bytes + size <= self.limit_bytes

    def charge(self, size: int) -> None:
        """Hold ``size`` bytes now, whether or not they fit (a body already received)."""
        self.used_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.used_bytes)

    async def reserve(self, size: int) -> None:
        """Hold ``size`` bytes once they fit; waits while other bodies hold the budget."""
        while not self.fits(size):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.charge(size)

    def release(self, size: int) -> None:
        """Give back ``size`` bytes held by ``charge`` or ``reserve``; the waiting
        connections look again."""
        if size <= 0:
            return
        self.used_bytes = max(0, self.used_bytes - size)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


__all__ = ["BodyBudget"]
