"""A job's window asked for in pieces sized to finish well within the request timeout, and adapting
when the store is slow.

A piece is one input over some rows of the window's grid and a group of the job's nodes (a subset of
them per query: ``node=~``), its cost the samples it answers. Pieces are planned only over what is
still missing (``plan``), so no piece that succeeded is asked for again; a piece that times out is
split in two (by nodes, then by time), not asked for whole again, and the job's ``Pace`` learns it:
later pieces are planned at most half that size, with one query fewer in flight. The pace is kept for
the job's life. Whatever its rows, a piece names at most ``NAME_CHARS`` characters of nodes and reads
at most ``RAW_SERIES`` raw series (VictoriaMetrics refuses queries over 16 KiB and over 300,000 series
by default).
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol

import numpy as np

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.errors import QueryTimeout
from lockstep.analytics.prom.grid import Window

SAMPLES_PER_QUERY = 250_000   # a piece's cost at first (its answer: up to about 6 MB of JSON); learned down on timeouts
MIN_SAMPLES = 1_000           # never planned smaller than this (a timed-out piece may still be split below it)
NAME_CHARS = 12_000           # characters of node names one query may carry
RAW_SERIES = 200_000          # raw series one query may read
CONCURRENCY = 4               # queries in flight per job at first; one fewer after each timeout, down to one


class Answers(Protocol):
    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...]) -> Block:
        """``inp``'s answer for ``job_id`` on its ``nodes``, on ``window``'s grid (raises ``PrometheusError``)."""


@dataclass
class Pace:
    """How much a job's pieces may ask for at once, learned down when the store times out."""
    samples: int = SAMPLES_PER_QUERY
    concurrency: int = CONCURRENCY
    timeouts: int = 0

    def slower(self, cost: int) -> None:
        self.samples = max(MIN_SAMPLES, min(self.samples, cost // 2))
        self.concurrency = max(1, self.concurrency - 1)
        self.timeouts += 1


@dataclass(frozen=True)
class Piece:
    """``inp`` on rows ``first`` .. ``first + rows - 1`` of the window's grid, for the job's nodes
    ``lo`` .. ``hi - 1`` (``by_node`` False: the query selects by job id, all nodes at once)."""
    inp: Input
    first: int
    rows: int
    lo: int
    hi: int
    cost: int                 # samples the answer may hold
    by_node: bool = True

    def halves(self, series: np.ndarray) -> tuple[Piece, Piece] | None:
        """The piece in two, by nodes while it has several, else by time; None when it is one row of one node."""
        if self.by_node and self.hi - self.lo > 1:
            mid = self.lo + int(np.searchsorted(np.cumsum(series[self.lo:self.hi]), series[self.lo:self.hi].sum() / 2))
            mid = min(max(mid, self.lo + 1), self.hi - 1)
            return (self._part(self.first, self.rows, self.lo, mid, series),
                    self._part(self.first, self.rows, mid, self.hi, series))
        if self.rows > 1:
            half = self.rows // 2      # the newer half first: it is what a partial result needs
            return (self._part(self.first + half, self.rows - half, self.lo, self.hi, series),
                    self._part(self.first, half, self.lo, self.hi, series))
        return None

    def _part(self, first: int, rows: int, lo: int, hi: int, series: np.ndarray) -> Piece:
        return Piece(self.inp, first, rows, lo, hi, rows * int(series[lo:hi].sum()), self.by_node)


def shares(names: list[str], raw: np.ndarray, lists: int = 1) -> np.ndarray:
    """Per node, its share of what one query may carry whatever its rows: its name (and a separator, in
    each of the query's ``lists`` of nodes) of ``NAME_CHARS``, its raw series of ``RAW_SERIES``."""
    return np.maximum(np.asarray([len(n) + 1 for n in names]) * lists / NAME_CHARS, np.asarray(raw) / RAW_SERIES)


def plan(inp: Input, missing: np.ndarray, series: np.ndarray, budget: int, by_node: bool = True,
         fixed: np.ndarray | None = None) -> list[Piece]:
    """Pieces of at most ``budget`` cost covering exactly the cells of ``missing`` (rows × nodes, True:
    not fetched yet); ``series``: the input's samples per node and row; ``fixed``: each node's
    ``shares``, at most one query's worth per piece."""
    out: list[Piece] = []
    fixed = np.zeros(missing.shape[1]) if fixed is None else fixed
    _cover(inp, missing, series, max(1, budget), by_node, 0, missing.shape[0], 0, missing.shape[1], out, fixed)
    return out


def _cover(inp: Input, missing: np.ndarray, series: np.ndarray, budget: int, by_node: bool,
           r0: int, r1: int, n0: int, n1: int, out: list[Piece], fixed: np.ndarray) -> None:
    sub = missing[r0:r1, n0:n1]
    if r0 >= r1 or n0 >= n1 or not sub.any():
        return
    if not sub.all():
        rows, cols = sub.any(axis=1), sub.any(axis=0)
        if not (rows.all() and cols.all()):      # cut away what is fetched already, rows then nodes
            for a, b in _runs(rows):
                for c, d in _runs(cols):
                    _cover(inp, missing, series, budget, by_node, r0 + a, r0 + b, n0 + c, n0 + d, out, fixed)
            return
        if by_node and n1 - n0 > 1:              # still mixed: halve it
            mid = (n0 + n1) // 2
            _cover(inp, missing, series, budget, by_node, r0, r1, n0, mid, out, fixed)
            _cover(inp, missing, series, budget, by_node, r0, r1, mid, n1, out, fixed)
        else:
            mid = (r0 + r1) // 2
            _cover(inp, missing, series, budget, by_node, mid, r1, n0, n1, out, fixed)
            _cover(inp, missing, series, budget, by_node, r0, mid, n0, n1, out, fixed)
        return
    groups = _groups(series[n0:n1], max(1, budget // (r1 - r0)), fixed[n0:n1]) if by_node else [(0, n1 - n0)]
    for a, b in groups:
        width = max(1, int(series[n0 + a:n0 + b].sum()))
        per = max(1, budget // width)
        for end in range(r1, r0, -per):          # newest rows first
            first = max(r0, end - per)
            out.append(Piece(inp, first, end - first, n0 + a, n0 + b, (end - first) * width, by_node))


def _groups(series: np.ndarray, per_row: int, fixed: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive nodes in groups of about equal weight, each at most ``per_row`` series and one
    query's ``fixed`` shares where one node allows."""
    weight = np.maximum(series / per_row, fixed)
    total = float(weight.sum())
    count = max(1, int(np.ceil(total - 1e-9)))
    bounds = np.searchsorted(np.cumsum(weight), np.arange(1, count) * total / count, side="right")
    edges = sorted(set([0, *bounds.tolist(), len(series)]))
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The runs of True in ``mask`` as half-open ranges."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


async def run(pieces: list[Piece], answer: Callable[[Piece], Awaitable[None]], pace: Pace, series: dict[str, np.ndarray],
              deadline: float | None = None) -> bool:
    """``answer`` each piece (it fetches and keeps it), at most ``pace.concurrency`` at a time, in order;
    a piece that times out is split and its halves go first. No new piece starts after ``deadline``
    (loop time), but the first always does (every call gets somewhere). True when every piece was
    answered; the first other error (or a timeout of a piece that cannot be split) cancels the pieces
    in flight and is raised: what was answered stays answered."""
    queue, running, started = deque(pieces), {}, False
    loop = asyncio.get_running_loop()
    try:
        while queue or running:
            while queue and len(running) < pace.concurrency and \
                    (deadline is None or loop.time() < deadline or not started):
                piece, started = queue.popleft(), True
                running[asyncio.ensure_future(answer(piece))] = piece
            if not running:
                return False
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                piece = running.pop(task)
                try:
                    task.result()
                except QueryTimeout:
                    pace.slower(piece.cost)
                    halves = piece.halves(series[piece.inp.name])
                    if halves is None:
                        raise
                    queue.extendleft(reversed(halves))
        return True
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
