"""Deadlines on every connection a lockstep service accepts (``--web.read-header-timeout``,
``--web.idle-timeout``), as Go's ``http.Server`` has them (``ReadHeaderTimeout``, ``IdleTimeout``).

- **idle**: a connection with no request in progress (just accepted, or after its last response) is
  closed once it has sent nothing for this long;
- **read header**: once the first byte of a request is in, its headers must be complete this soon.

Without them a caller that connects and stalls, or trickles a header a byte at a time, holds a
descriptor for as long as it likes (aiohttp's own keep-alive default is an hour): enough of them and
the process is out of descriptors and Prometheus' scrapes go unanswered.

aiohttp offers no hook for either, so each accepted connection's protocol (aiohttp's request handler)
is wrapped in one that watches its bytes come in, and a middleware, run first on every request, says
when the headers were complete (a request reached the app) and when its handler finished.
"""
from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Callable

from aiohttp import web

from lockstep.exporters.toolkit.protowrap import Wrapper

DEFAULT_S = 60.0   # the exporter-toolkit's read-header timeout; nginx's client_header_timeout


@dataclass(frozen=True)
class ConnectionTimeouts:
    read_header_s: float = DEFAULT_S
    idle_s: float = DEFAULT_S

    def __post_init__(self) -> None:
        for flag, value in (("--web.read-header-timeout", self.read_header_s), ("--web.idle-timeout", self.idle_s)):
            if not 0 < value < math.inf:   # NaN fails too
                raise ValueError(f"{flag} must be a positive number of seconds, got {value!r}")


def add_flags(parser) -> None:
    parser.add_argument("--web.read-header-timeout", dest="web.read-header-timeout", type=float, default=DEFAULT_S,
                        metavar="SECONDS", help="close a connection whose request headers are not complete this "
                                                "long after their first byte")
    parser.add_argument("--web.idle-timeout", dest="web.idle-timeout", type=float, default=DEFAULT_S,
                        metavar="SECONDS", help="close a connection that sends no request for this long (after "
                                                "it was accepted or since its last response)")


def from_args(args) -> ConnectionTimeouts:
    """The timeouts of parsed flags (ValueError for a bad value)."""
    return ConnectionTimeouts(getattr(args, "web.read-header-timeout", DEFAULT_S),
                              getattr(args, "web.idle-timeout", DEFAULT_S))


class Deadlines:
    """The deadlines of one server: ``protocol_factory`` wraps the server's protocol factory,
    ``middleware`` goes first in the app's middlewares."""

    def __init__(self, timeouts: ConnectionTimeouts) -> None:
        self.timeouts = timeouts
        self._guards: dict[object, _Guard] = {}   # by transport: what a request names its connection by

    def protocol_factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guard(make(), self)

    def started(self, transport) -> None:
        """A request on this connection is complete and being answered (its header deadline is met)."""
        guard = self._guards.get(transport)
        if guard is not None:
            guard.request_started()

    def finished(self, transport) -> None:
        """The request ``started`` on this connection is answered."""
        guard = self._guards.get(transport)
        if guard is not None:
            guard.request_finished()

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        transport = request.transport
        self.started(transport)
        try:
            return await handler(request)
        finally:
            self.finished(transport)


class _Guard(Wrapper):
    """One connection: its timers, around the protocol that serves it (every call passed on)."""

    def __init__(self, inner: asyncio.Protocol, deadlines: Deadlines) -> None:
        super().__init__(inner)
        self.deadlines = deadlines
        self.busy = 0                                   # requests whose handler is running
        self._timer: asyncio.TimerHandle | None = None
        self._reading_header = False

    def connection_made(self, transport) -> None:
        self.deadlines._guards[transport] = self
        super().connection_made(transport)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if not self.busy and not self._reading_header:   # the first byte of a request
            self._reading_header = True
            self._arm(self.deadlines.timeouts.read_header_s, "read_header")
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.deadlines._guards.pop(self.transport, None)
        super().connection_lost(exc)

    def request_started(self) -> None:
        self.busy += 1
        self._reading_header = False
        self._cancel()

    def request_finished(self) -> None:
        self.busy -= 1
        if not self.busy:
            self._arm_idle()

    def _arm_idle(self) -> None:
        self._arm(self.deadlines.timeouts.idle_s, "idle")

    def _arm(self, delay: float, reason: str) -> None:
        self._cancel()
        self._timer = asyncio.get_running_loop().call_later(delay, self._expired, reason)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self, reason: str) -> None:
        self._timer = None
        transport = self.transport
        if self.busy or transport is None or transport.is_closing():
            return
        if reason == "idle" and transport.get_write_buffer_size():
            self._arm_idle()   # the last response is still on its way out to a slow reader
            return
        transport.close()
