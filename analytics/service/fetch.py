"""A job's window from a source of answers: fetched whole, in pieces, or moved on from the one held.

Whole: the job's GPUs first (``lockstep_gpu_job_info``: the columns; asked for by groups of the nodes
the window's two ends name, every row at once, then on any other node), then every input in pieces
sized to finish well within the request timeout (``lockstep.analytics.service.pieces``: a group of the
job's nodes and a span of time per query, split when one times out), each answer placed straight into
the preallocated float32 matrices and dropped, so a 16,384-GPU window never sits in memory as JSON or
as a frame. Moved on: only the rows after the last one held are asked for, with that last row again (a
scrape that came late; more rows where the store receives samples later, see ``--refetch-steps``),
and the rows that left the window are dropped; when the job's GPUs changed, the grids do not line up,
or the held window ended before the new one starts, the window is fetched whole instead. The service
fetches a new job's window across refreshes, keeping what each one fetched
(``lockstep.analytics.service.filling``).
"""
from __future__ import annotations

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.frame.window import JobWindow
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service import pieces
from lockstep.analytics.service.filling import Fill, continues
from lockstep.analytics.service.pieces import Answers, Pace

__all__ = ["Answers", "advance", "fetch_window"]

SAMPLES_PER_QUERY = pieces.SAMPLES_PER_QUERY   # a fresh pace's pieces


async def fetch_window(source: Answers, job_id: str, window: Window, columns=None, pace: Pace | None = None,
                       inputs: tuple[Input, ...] | None = None, leave_out: frozenset[str] = frozenset()
                       ) -> JobWindow | None:
    """The job's window, whole; with ``columns`` (the GPUs held before), None when the job has GPUs
    outside them in ``window`` (its membership changed). ``pace``: the job's, learned (a fresh one);
    ``inputs``: as the job's were asked for (raw, or recorded where the store holds them now), but the
    inputs named in ``leave_out`` (their matrices stay empty)."""
    fill = await Fill.start(source, job_id, window, columns, inputs, leave_out)
    await fill.fill(source, pace if pace is not None else Pace(SAMPLES_PER_QUERY), bands=False)
    return None if fill.changed else fill.result()


async def advance(source: Answers, held: JobWindow, job_id: str, window: Window, again: int = 1,
                  pace: Pace | None = None, inputs: tuple[Input, ...] | None = None) -> JobWindow | None:
    """``held`` moved on to ``window``, fetching only its new rows and its last ``again`` rows once more;
    None when it cannot be."""
    if not continues(held.grid, window):
        return None
    first = max(window.start, held.grid.end - (again - 1) * window.step)
    rows = await fetch_window(source, job_id, Window(first, window.end, window.step), held.columns, pace, inputs)
    if rows is None:
        return None
    moved = held.moved_to(window, rows)
    moved.fetched = rows.fetched
    # a GPU whose last row left the window has left the job: the whole window has one column fewer
    return moved if moved.members().all() else None
