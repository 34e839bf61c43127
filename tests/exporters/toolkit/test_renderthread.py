"""The render thread (``lockstep.exporters.toolkit.renderthread``): calls run off the event loop, one at a
time in the order given, results and exceptions come back to the caller, the loop keeps serving while a
call runs, and ``close`` ends the thread."""
from __future__ import annotations

import asyncio
import threading

import pytest

from lockstep.exporters.toolkit.renderthread import RenderThread


async def test_runs_off_the_loop_and_returns_the_result():
    worker = RenderThread("t")
    try:
        thread = await worker.run(threading.current_thread)
        assert thread is not threading.current_thread() and thread.name == "t"
        assert await worker.run(lambda a, b: a + b, 2, 3) == 5
        assert await worker.run(threading.current_thread) is thread   # the same thread every time
    finally:
        worker.close()


async def test_exception_reaches_the_caller_and_the_thread_goes_on():
    worker = RenderThread()
    try:
        def boom():
            raise ValueError("bad sample")
        with pytest.raises(ValueError, match="bad sample"):
            await worker.run(boom)
        assert await worker.run(lambda: "still serving") == "still serving"
    finally:
        worker.close()


async def test_calls_run_one_at_a_time_in_order_while_the_loop_stays_free():
    worker, release, order = RenderThread(), threading.Event(), []
    try:
        def first():
            order.append("first started")
            release.wait(30)
            order.append("first done")
            return 1
        calls = [asyncio.ensure_future(worker.run(first)),
                 asyncio.ensure_future(worker.run(lambda: order.append("second") or 2))]
        for _ in range(3000):   # the loop runs while the first call blocks its thread
            if order:
                break
            await asyncio.sleep(0.01)
        assert order == ["first started"]
        release.set()
        assert await asyncio.gather(*calls) == [1, 2]
        assert order == ["first started", "first done", "second"]
    finally:
        release.set()
        worker.close()


async def test_a_cancelled_caller_leaves_the_thread_serving():
    worker, release = RenderThread(), threading.Event()
    try:
        call = asyncio.ensure_future(worker.run(release.wait, 30))
        await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        assert await worker.run(lambda: "next") == "next"
    finally:
        release.set()
        worker.close()


async def test_close_ends_the_thread():
    worker = RenderThread("closing")
    thread = await worker.run(threading.current_thread)
    worker.close()
    thread.join(30)
    assert not thread.is_alive()
