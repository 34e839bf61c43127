"""The event loop's own error reports, rate-limited per kind.

Out of descriptors, asyncio reports ``socket.accept() out of system resource`` for each connection it
cannot accept, and keeps retrying the listening socket: under a connection flood, unbounded, that is
a line for every retry, and the CPU spent writing them. Here
each kind of report (its message's first line) is logged the first time, then at most once per
``interval_s`` with the number of reports held back since.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

log = logging.getLogger("lockstep.web")
MAX_KINDS = 64   # kinds tracked at once; past that every new kind shares one bucket


class LoopErrorLimiter:
    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self._clock = interval_s, clock
        self._last: dict[str, float] = {}       # kind -> when last logged
        self._held: dict[str, int] = {}         # kind -> reports held back since

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        kind = str(context.get("message", "")).split("\n", 1)[0][:120]
        if kind not in self._last and len(self._last) >= MAX_KINDS:
            kind = "(other event loop errors)"
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            context = {**context, "message": f"{context.get('message', '')}\n(and {held} more like it in the last "
                                              f"{now - last:.0f} s, not logged)"}
        loop.default_exception_handler(context)


def install(loop: asyncio.AbstractEventLoop, interval_s: float = 10.0) -> LoopErrorLimiter:
    limiter = LoopErrorLimiter(interval_s)
    loop.set_exception_handler(limiter)
    return limiter
