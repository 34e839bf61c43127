"""One long-lived thread that runs a service's scrapes off the event loop.

``asyncio.to_thread`` goes through the default ThreadPoolExecutor: a work item, a
``concurrent.futures.Future`` with its condition variable, a chained asyncio future and a copied
context per call, ~0.1 ms of CPU per scrape on top of the two thread wake-ups any hand-off needs
(figures: docs/architecture.md, performance notes). A service whose scrapes run one at a time anyway
hands them to this thread through a ``queue.SimpleQueue`` (C) and gets the result back with one
``call_soon_threadsafe``. The loop stays free while a scrape runs (a collector stuck in a hung mount
does not stop the server answering, or refusing, other requests); calls queue behind a running one.
"""
from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable

_STOP = object()


class RenderThread:
    """Runs ``fn(*args)`` calls one after another in a daemon thread, started on first use."""

    def __init__(self, name: str = "render") -> None:
        self._name = name
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the thread; its result, or its exception raised here."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.put((loop, future, fn, args))
        return await future

    def close(self) -> None:
        """Stop the thread once the calls queued before this one are done (does not wait for it)."""
        if self._thread is not None:
            self._calls.put(_STOP)
            self._thread = None

    def _serve(self) -> None:
        while (call := self._calls.get()) is not _STOP:
            loop, future, fn, args = call
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting coroutine, which raises it
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop closed while the call ran: nobody awaits it any more
                pass
            del call, loop, future, fn, args, result, error


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the awaiting request went away (client hung up, server stopping)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
