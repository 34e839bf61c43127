"""A node agent collector that holds each scrape until released, and a wait for a condition on the event loop:
for the tests of scrapes that wait their turn or whose caller hangs up (tests/exporters/core/test_server_hostile.py
through aiohttp, tests/exporters/toolkit/test_fastpath.py through the fast path)."""
from __future__ import annotations

import asyncio
import threading
from typing import Callable


class Gate:
    """A collector that blocks each scrape until released, counting the scrapes that ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0

    def collect(self):
        self.started += 1
        self.release.wait(60)
        return []


async def reached(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``predicate`` every 10 ms until it holds; AssertionError after ``timeout`` seconds."""
    for _ in range(int(timeout * 100)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"condition not reached in {timeout:g} s")
