"""One round of background work per interval, forever: a round longer than the interval delays the next and
never overlaps it. The multi-target exporters poll (power, storage) and sweep (fabric) with it."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable


async def every(interval_s: float, one_round: Callable[[], Awaitable[None]]) -> None:
    while True:
        started = time.monotonic()
        await one_round()
        await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))
