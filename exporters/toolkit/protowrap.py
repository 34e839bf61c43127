"""An asyncio protocol around another, passing every call on: the base of the wrappers each accepted connection
of a lockstep service goes through (``conntimeouts``' deadlines, ``fastpath``'s plain scrapes), each overriding
what it watches or takes over."""
from __future__ import annotations

import asyncio


class Wrapper(asyncio.Protocol):
    def __init__(self, inner: asyncio.Protocol) -> None:
        self.inner = inner
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()
