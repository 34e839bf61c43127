"""A fast path for plain scrapes: ``GET <path> HTTP/1.1`` with no body, answered without aiohttp.

Almost every request a node agent gets is Prometheus' scrape of ``/metrics``, and the agent's CPU per scrape has a
budget (docs/architecture.md, performance notes: what this path saves is measured there). aiohttp's request
machinery (its request and response objects, router, middlewares and writer) is not needed to answer it.

Each accepted connection's protocol is wrapped: while the connection sends nothing but complete, plain requests
for the route's path, this wrapper parses them and writes the route's answer itself; the first byte it does not
take (another path or method, a body, a query string, HTTP/1.0, a pipelined request, a header it would have to
judge) goes to aiohttp with everything still unanswered, and aiohttp serves the connection from then on. So
anything unusual is still judged by aiohttp, and a plain scrape gets the same answer either way (``route.answer``
makes both).

Not used where the web config asks for basic auth (aiohttp's middleware checks it); TLS is below both. The
connection deadlines (``conntimeouts``) see a fast request as they see one that reaches aiohttp.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Awaitable, Callable, Mapping

from aiohttp import web

from lockstep.exporters.toolkit.conntimeouts import Deadlines
from lockstep.exporters.toolkit.protowrap import Wrapper

log = logging.getLogger("lockstep.web")

MAX_HEAD = 8190     # aiohttp's own bound on a request line or header field
REASONS = {200: "OK", 499: "Client Closed Request", 500: "Internal Server Error", 503: "Service Unavailable"}
# RFC 9110 §5.6.2 token; a field value of visible characters, spaces and tabs (§5.5)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
# Fields that change how the request is framed or served: such a request is aiohttp's to judge.
_FRAMING = frozenset({"content-length", "transfer-encoding", "upgrade", "expect"})


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes


# answer(Accept, Accept-Encoding, gone) → the reply; gone(): whether the caller has hung up
Answer = Callable[[str, str, Callable[[], bool]], Awaitable[Reply]]


@dataclass(frozen=True)
class FastRoute:
    """What an app answers on the fast path: ``GET path``, by ``answer``."""
    path: str
    answer: Answer


FAST_ROUTE = web.AppKey("fast_route", FastRoute)


def parse_head(head: bytes, path: bytes) -> dict[str, str] | None:
    """The header fields (lower-case names) of a request head (without its final empty line) when it is a
    plain ``GET path HTTP/1.1`` the fast path may answer; None for anything else."""
    lines = head.split(b"\r\n")
    if lines[0] != b"GET " + path + b" HTTP/1.1":
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):   # also a folded line (leading space) or a bare LF
            return None
        value = value.strip(b" \t")
        key = name.decode("ascii").lower()
        if key in fields or not _VALUE.fullmatch(value):
            return None
        if key in _FRAMING and not (key == "content-length" and value == b"0"):
            return None
        fields[key] = value.decode("latin-1")
    return fields


def wants_close(fields: Mapping[str, str]) -> bool:
    return "close" in (token.strip().lower() for token in fields.get("connection", "").split(","))


_date: tuple[int, str] = (0, "")


def http_date() -> str:
    """The ``Date`` field, formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True))
    return _date[1]


def response_bytes(reply: Reply, extra: Mapping[str, str], close: bool) -> bytes:
    head = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Unknown')}",
            f"Content-Length: {len(reply.body)}", f"Date: {http_date()}"]
    head += [f"{k}: {v}" for k, v in reply.headers.items()]
    head += [f"{k}: {v}" for k, v in extra.items()]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body


class FastPath:
    """The fast path of one server: ``protocol_factory`` wraps aiohttp's protocol factory; ``extra``: headers
    added to every answer (the web config's); ``deadlines``: told when a fast request starts and ends."""

    def __init__(self, route: FastRoute, deadlines: Deadlines | None = None, extra: Mapping[str, str] | None = None):
        self.route, self.path, self.deadlines = route, route.path.encode("latin-1"), deadlines
        self.extra = dict(extra or {})
        self.tasks: set[asyncio.Task] = set()

    def protocol_factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Connection(make(), self)


class _Connection(Wrapper):
    """One connection: plain requests answered here until the first other byte; then aiohttp's."""

    def __init__(self, inner: asyncio.Protocol, fast: FastPath) -> None:
        super().__init__(inner)
        self.fast = fast
        self.pending = b""          # bytes of requests not yet answered
        self.handed = False         # aiohttp has the connection
        self.serving = False        # a fast request is being answered

    def data_received(self, data: bytes) -> None:
        if self.handed:
            self.inner.data_received(data)
            return
        self.pending += data
        if not self.serving:
            self._next()
        elif len(self.pending) > MAX_HEAD:   # more than a request head while one is answered: read no more now
            self.transport.pause_reading()

    def eof_received(self):
        # A caller that shuts its side is taken as one that hung up, as aiohttp takes it: the connection closes
        # (a scrape still waiting for its turn then costs nothing).
        if not self.handed:
            self._hand_over()
        return self.inner.eof_received()

    def _next(self) -> None:
        end = self.pending.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
        if end < 0:
            if len(self.pending) > MAX_HEAD:
                self._hand_over()
            return
        fields = parse_head(self.pending[:end], self.fast.path) if end + 4 == len(self.pending) else None
        if fields is None:
            self._hand_over()
            return
        self.pending, self.serving = b"", True
        if self.fast.deadlines is not None:
            self.fast.deadlines.started(self.transport)
        task = asyncio.get_running_loop().create_task(self._serve(fields))
        self.fast.tasks.add(task)
        task.add_done_callback(self.fast.tasks.discard)

    def _hand_over(self) -> None:
        self.handed = True
        pending, self.pending = self.pending, b""
        if pending:
            self.inner.data_received(pending)

    def _gone(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    async def _serve(self, fields: dict[str, str]) -> None:
        close = wants_close(fields)
        try:
            try:
                reply = await self.fast.route.answer(fields.get("accept", ""), fields.get("accept-encoding", ""),
                                                     self._gone)
            except Exception:   # a bug in answering must not leave the caller waiting
                log.exception("answering a scrape failed")
                reply, close = Reply(500, {"Content-Type": "text/plain; charset=utf-8"}, b"500 Internal Server Error\n"), True
            if self._gone():
                return
            if reply.status == 499:
                self.transport.close()
                return
            self.transport.write(response_bytes(reply, self.fast.extra, close))
            if close:
                self.transport.close()
        finally:
            self.serving = False
            if self.fast.deadlines is not None:
                self.fast.deadlines.finished(self.transport)
            if self.pending and not self._gone():
                self._next()
                if not self.transport.is_reading():
                    self.transport.resume_reading()
