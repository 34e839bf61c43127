"""A job's window from a source of answers: fetched whole, in pieces, or moved on from the one held.

Whole: the job's GPUs first (``lockstep_gpu_job_info``: the columns), then every input in pieces of
at most ``SAMPLES_PER_QUERY`` samples (by time), each answer placed straight into the preallocated
float32 matrices and dropped, so a 16,384-GPU window never sits in memory as JSON or as a frame.
Moved on: only the rows after the last one held are asked for, with that last row again (a scrape
that came late; more rows where the store receives samples later, see ``--refetch-steps``), and
the rows that left the window are dropped; when the job's GPUs changed, the
grids do not line up, or the held window ended before the new one starts, the window is fetched
whole instead.
"""
from __future__ import annotations

import asyncio
from functools import partial
from typing import Awaitable, Callable, Protocol

import numpy as np

from lockstep.analytics.frame.features import job_columns
from lockstep.analytics.frame.inputs import INPUTS, MEMBER, NODE_KEY, Input
from lockstep.analytics.frame.window import JobWindow
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window

SAMPLES_PER_QUERY = 1_000_000    # about 25 MB of JSON per answer
CONCURRENCY = 4                  # queries in flight per job
UNSEEN_GPUS = 16_384             # a job's GPUs assumed for sizing when it holds none at either end of a window


class Answers(Protocol):
    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...]) -> Block:
        """``inp``'s answer for ``job_id`` on its ``nodes``, on ``window``'s grid (raises ``PrometheusError``)."""


async def fetch_window(source: Answers, job_id: str, window: Window, columns=None) -> JobWindow | None:
    """The job's window, whole; with ``columns`` (the GPUs held before), None when the job has GPUs
    outside them in ``window`` (its membership changed)."""
    expected = len(columns) if columns is not None else await _gpus_now(source, job_id, window)
    members = await _gather([partial(_piece, source, MEMBER, job_id, first, sub)
                             for first, sub in window.chunks(_rows_per_query(MEMBER, expected, 0))])
    found = job_columns([(job_id, b.labels[s].get("node", ""), b.labels[s].get("gpu", ""))
                         for _, b in members for s in np.unique(b.series)])
    if columns is not None and not set(found).issubset(set(columns)):
        return None
    out = JobWindow.empty(window, found if columns is None else columns)
    for first, block in members:
        out.place(MEMBER, block, first)
        out.fetched += block.samples
    nodes = tuple(dict.fromkeys(out.columns.get_level_values("node")))
    if nodes:
        await _gather([partial(_placed, out, source, inp, job_id, first, sub, nodes) for inp in INPUTS
                       if inp is not MEMBER for first, sub in window.chunks(_rows_per_query(inp, len(out.columns),
                                                                                             len(nodes)))])
    return out


async def advance(source: Answers, held: JobWindow, job_id: str, window: Window, again: int = 1) -> JobWindow | None:
    """``held`` moved on to ``window``, fetching only its new rows and its last ``again`` rows once more;
    None when it cannot be."""
    if not _continues(held.grid, window):
        return None
    first = max(window.start, held.grid.end - (again - 1) * window.step)
    rows = await fetch_window(source, job_id, Window(first, window.end, window.step), held.columns)
    if rows is None:
        return None
    moved = held.moved_to(window, rows)
    moved.fetched = rows.fetched
    # a GPU whose last row left the window has left the job: the whole window has one column fewer
    return moved if moved.members().all() else None


def _continues(held: Window, window: Window) -> bool:
    """Same step and lattice, and the held rows reach into the new window (no gap between them)."""
    offset = (window.start - held.start) / window.step
    return (held.step == window.step and abs(offset - round(offset)) < 1e-6
            and held.start <= window.start <= held.end <= window.end)


def _rows_per_query(inp: Input, gpus: int, nodes: int) -> int:
    series = (nodes if inp.by == NODE_KEY else gpus) * inp.fanout
    return max(1, SAMPLES_PER_QUERY // max(1, series))


async def _gpus_now(source: Answers, job_id: str, window: Window) -> int:
    """The job's GPUs at the window's first and last steps, one small query (sizes the pieces of the
    membership query)."""
    ends = Window(window.start, window.end, max(window.step, window.end - window.start))
    block = await source.series(MEMBER, job_id, ends, ())
    return len(block.labels) or UNSEEN_GPUS


async def _piece(source: Answers, inp: Input, job_id: str, first: int, sub: Window) -> tuple[int, Block]:
    return first, await source.series(inp, job_id, sub, ())


async def _placed(out: JobWindow, source: Answers, inp: Input, job_id: str, first: int, sub: Window,
                  nodes: tuple[str, ...]) -> None:
    block = await source.series(inp, job_id, sub, nodes)
    out.place(inp, block, first)
    out.fetched += block.samples


async def _gather(calls: list[Callable[[], Awaitable]]) -> list:
    """Each call awaited, at most CONCURRENCY at a time; the first failure cancels the rest and is raised."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def gated(call: Callable[[], Awaitable]):
        async with gate:
            return await call()

    tasks = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(gated(c)) for c in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [t.result() for t in tasks]
