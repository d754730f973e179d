"""The server-wide budget of request bodies: a reservation waits until others release."""

from __future__ import annotations

import asyncio

import pytest

from cqlcdc.server.budget import BodyBudget


def test_a_reservation_waits_for_room_and_a_lone_large_body_goes_through() -> None:
    async def scenario() -> None:
        budget = BodyBudget(100)
        await budget.reserve(70)
        waiting = asyncio.create_task(budget.reserve(50))
        await asyncio.sleep(0)  # let it run up to its wait
        assert not waiting.done() and budget.used_bytes == 70
        budget.release(30)  # 40 held: 50 more fits
        await asyncio.wait_for(waiting, 1)
        assert budget.used_bytes == 90 and budget.peak_bytes == 90
        budget.release(90)
        await asyncio.wait_for(budget.reserve(500), 1)  # alone: larger than the budget
        assert budget.used_bytes == 500
        cancelled = asyncio.create_task(budget.reserve(1))
        await asyncio.sleep(0)
        cancelled.cancel()  # a connection closed while waiting holds nothing
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        budget.release(500)
        assert budget.used_bytes == 0

    asyncio.run(scenario())
