"""A job's window filled piece by piece (``lockstep.analytics.service.pieces``), kept across refreshes.

The newest rows come first: the job's GPUs over them (``lockstep_gpu_job_info``; with those at the
window's two ends: the columns), then every other input over them, then the same for the older rows (a
GPU found there only is added as a column). What was fetched is kept when a refresh fails, times out or runs
out of its time: the next refresh moves it on to its own window (rows still inside stay, the last
``--refetch-steps`` rows are asked for again as a held window's are) and asks only for what is missing.

A partial window is scored on its complete rows (every input of every GPU fetched) once the newest
``ENOUGH_S`` of them are complete: a straggler is a GPU that became slower than its peers against its
own usual pace, learned over the first rows it holds, so the newest rows of every GPU score a slowdown
that began within them; one that began earlier shows as imbalance until the older rows are in. Its
coverage (the share of the window's rows that are complete) is served with it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import Features, job_columns
from lockstep.analytics.frame.inputs import INPUTS, MEMBER, MEMBER_ELSEWHERE, MEMBER_ON_NODES, NODE_KEY, Input
from lockstep.analytics.frame.window import JobWindow
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service.pieces import NAME_CHARS, Answers, Pace, Piece, plan, run, shares
from lockstep.exporters.toolkit.logs import kv

ENOUGH_S = 300.0         # the newest complete rows a partial result needs (the straggler scorer's baseline span)
RESCORE_S = 120.0        # a partial result is scored again at most this often: the time goes to fetching the rest
UNSEEN_GPUS = 16_384     # a job's GPUs assumed for sizing when it holds none at either end of a window

log = logging.getLogger("lockstep.analytics")


class _MembershipChanged(Exception):
    """New rows name a GPU outside the window's columns."""


@dataclass
class Fill:
    """One job's window being fetched: its GPUs' answers until the columns are known, then the window
    itself with, per input, the cells (rows × nodes) still missing."""
    job_id: str
    grid: Window
    expected: int                                   # GPUs the membership query is sized for
    held: pd.MultiIndex | None = None               # the columns of the window this one continues
    member_missing: np.ndarray | None = None        # per row (all of them at first)
    members: list[tuple[int, Block]] = field(default_factory=list)
    window: JobWindow | None = None
    missing: dict[str, np.ndarray] = field(default_factory=dict)   # input → rows × nodes (× 1: by job id)
    fetched: int = 0                                # samples the last ``fill`` placed
    changed: bool = False                           # the job's GPUs changed: start again
    inputs: tuple[Input, ...] = INPUTS              # as asked for: raw, or from the series the store records
    scored_at: float | None = None                  # monotonic time its partial result was last scored
    ends: list[dict] = field(default_factory=list)  # the GPUs held at the window's first and last steps

    def __post_init__(self) -> None:
        if self.member_missing is None:
            self.member_missing = np.ones(self.grid.rows, bool)

    @classmethod
    async def start(cls, source: Answers, job_id: str, grid: Window, held: pd.MultiIndex | None = None,
                    inputs: tuple[Input, ...] | None = None, leave_out: frozenset[str] = frozenset()) -> Fill:
        """A fill of ``grid`` (``held``: the columns of a window it continues); ``inputs`` as the job's
        last fill asked for them, else as the store holds them now (``read_inputs``), but those named in
        ``leave_out``."""
        now = (await gpus_now(source, job_id, grid)).labels if held is None else []
        expected = len(held) if held is not None else len(now) or UNSEEN_GPUS
        node = held[0][1] if held is not None and len(held) else (now[0].get("node", "") if now else "")
        return cls(job_id, grid, expected, held, ends=now,
                   inputs=tuple(i for i in (inputs if inputs is not None else await read_inputs(source, grid, node))
                                if i.name not in leave_out))

    @property
    def complete(self) -> bool:
        return self.window is not None and not self.member_missing.any() and \
            not any(m.any() for m in self.missing.values())

    def complete_rows(self) -> np.ndarray:
        out = ~self.member_missing if self.window is not None else np.zeros(self.grid.rows, bool)
        for m in self.missing.values():
            out &= ~m.any(axis=1)
        return out

    def coverage(self) -> float:
        """The share of the window's rows fetched for every input of every GPU."""
        return float(self.complete_rows().mean()) if self.grid.rows else 1.0

    def enough(self) -> bool:
        newest = min(self.grid.rows, max(1, round(ENOUGH_S / self.grid.step)))
        return self.window is not None and bool(self.complete_rows()[self.grid.rows - newest:].all())

    def features(self) -> Features | None:
        """The complete rows as the scorers read them, once the newest are complete and the last partial
        result is ``RESCORE_S`` old (None: keep the last one)."""
        now = time.monotonic()
        if not self.enough() or (self.scored_at is not None and now - self.scored_at < RESCORE_S):
            return None
        self.scored_at = now
        return self.window.features(self.complete_rows())

    def result(self) -> JobWindow:
        """The whole window (``complete``), without the GPUs that left it while it was filled."""
        out = self.window if self.held is not None or self.window.members().all() else _present(self.window)
        out.fetched = self.fetched
        return out

    async def fill(self, source: Answers, pace: Pace, deadline: float | None = None, bands: bool = True) -> bool:
        """Fetch what is missing, the newest ``ENOUGH_S`` first (``bands``; else all rows at once), until
        it is all in (True) or ``deadline`` (loop time) has passed; raises the first error that is not a
        timeout (what was fetched is kept)."""
        self.fetched = 0
        newest = np.zeros(self.grid.rows, bool)
        newest[self.grid.rows - min(self.grid.rows, round(ENOUGH_S / self.grid.step)):] = True
        bands = bands and self.expected * self.grid.rows > pace.samples     # a job whose GPUs fit one query: at once
        for _ in range(3):      # again where a GPU found in older rows made its node's newer rows missing
            for rows in ((newest, ~newest) if bands else (np.ones(self.grid.rows, bool),)):
                if not await self._fill_rows(source, pace, deadline, rows, bands):
                    return False
            if self.complete or self.changed:
                break
        return self.complete

    async def _fill_rows(self, source: Answers, pace: Pace, deadline: float | None, rows: np.ndarray,
                         newest_first: bool) -> bool:
        """The job's GPUs over ``rows``, then every other input over them."""
        whole = deadline is None and rows.all() and self.member_missing.all() and self.window is None and \
            self.held is None and await self._members_on_nodes(source, pace)
        member = {MEMBER.name: np.asarray([max(1, self.expected)])}
        pieces = [] if whole else \
            plan(MEMBER, (self.member_missing & rows)[:, None], member[MEMBER.name], pace.samples, by_node=False)
        try:
            if not await run(pieces, partial(self._member, source), pace, member, deadline):
                return False
        except _MembershipChanged:
            self.changed = True
            return False
        if self.window is None and not self._columns():
            return False
        series = self._series()
        pieces = [p for inp in self.inputs if inp is not MEMBER for p in self._plan(inp, series[inp.name], pace, rows)]
        if newest_first:
            pieces.sort(key=lambda p: -(p.first + p.rows))       # stable: by input where they end alike
        return await run(pieces, partial(self._answer, source, self._nodes()), pace, series, deadline)

    def moved_to(self, grid: Window, again: int) -> Fill | None:
        """This fill on ``grid`` (the same lattice, reaching into it), its last ``again`` rows missing
        again when ``grid`` ends later (they may have been fetched before all their samples were stored);
        None when nothing of it can be kept."""
        if not continues(self.grid, grid):
            return None
        step = grid.step
        skip = round((grid.start - self.grid.start) / step)
        upto = round((max(grid.start, self.grid.end - (again - 1) * step) - self.grid.start) / step) \
            if grid.end > self.grid.end else self.grid.rows
        new = Window(self.grid.start + upto * step, grid.end, step)
        moved = Fill(self.job_id, grid, self.expected, self.held,
                     np.concatenate([self.member_missing[skip:upto], np.ones(new.rows, bool)]), inputs=self.inputs,
                     scored_at=self.scored_at)
        if self.window is None:
            moved.members = [shifted for first, b in self.members if (shifted := _shift(first, b, skip, upto))]
            return moved
        moved.window = self.window.moved_to(grid, JobWindow.empty(new, self.window.columns))
        moved.missing = {name: np.concatenate([m[skip:upto], np.ones((new.rows, m.shape[1]), bool)])
                         for name, m in self.missing.items()}
        return moved

    def _plan(self, inp: Input, series: np.ndarray, pace: Pace, rows: np.ndarray) -> list[Piece]:
        """``inp``'s missing cells on ``rows`` where the job's GPUs are in (an answer is kept only where
        the GPU held the job), in pieces."""
        by_node = not inp.per_job
        names = inp.promql(self.job_id, self.grid.step, ("",)).count("node=~")     # the node list, once per selector
        fixed = shares(self._nodes(), series * (1 if inp.recorded else inp.reads), names) if by_node else None
        missing = self.missing[inp.name] & (rows & ~self.member_missing)[:, None]
        return plan(inp, missing, series, pace.samples, by_node, fixed)

    async def _members_on_nodes(self, source: Answers, pace: Pace) -> bool:
        """Every row's membership at once (a window fetched whole): by groups of the nodes whose GPUs held the
        job at the window's two ends, each piece all the rows (pieces of time would each load every series
        again, and read the store's lookback again before their first row: the store's CPU for a 4,096-GPU hour
        halves), then the job's series on any other node, in pieces of time sized for the whole job (nearly
        always none). False, nothing asked, where the ends name no node or more of them than one query names."""
        nodes = tuple(dict.fromkeys(labels.get("node", "") for labels in self.ends))
        if not nodes or sum(len(n) + 1 for n in nodes) > NAME_CHARS:
            return False
        held = pd.Series([labels.get("node", "") for labels in self.ends]).value_counts(sort=False)
        per_node = held.reindex(list(nodes)).to_numpy()
        on = plan(MEMBER_ON_NODES, np.ones((self.grid.rows, len(nodes)), bool), per_node, pace.samples,
                  fixed=shares(nodes, per_node))
        await run(on, partial(self._member_of, source, nodes), pace, {MEMBER.name: per_node})
        rest = np.asarray([max(1, self.expected)])
        elsewhere = plan(MEMBER_ELSEWHERE, np.ones((self.grid.rows, 1), bool), rest, pace.samples, by_node=False)
        await run(elsewhere, partial(self._member_of, source, nodes), pace, {MEMBER.name: rest})
        self.member_missing[:] = False
        return True

    async def _member_of(self, source: Answers, nodes: tuple[str, ...], piece: Piece) -> None:
        """A piece of the membership asked for by node (``_members_on_nodes``), kept for the columns."""
        asked = nodes[piece.lo:piece.hi] if piece.by_node else nodes
        block = await source.series(piece.inp, self.job_id, self.grid.sub(piece.first, piece.rows), asked)
        self.members.append((piece.first, block))
        self.fetched += block.samples

    async def _member(self, source: Answers, piece: Piece) -> None:
        block = await source.series(MEMBER, self.job_id, self.grid.sub(piece.first, piece.rows), ())
        if self.window is None:
            self.members.append((piece.first, block))
        else:
            known = set(self.window.columns)
            new = {(s.get("node", ""), s.get("gpu", "")) for s in block.labels} - {(n, g) for _, n, g in known}
            if new and self.held is not None:
                raise _MembershipChanged
            if new:
                self._widen(new)
            self.window.place(MEMBER, block, piece.first)
        self.fetched += block.samples
        self.member_missing[piece.first:piece.first + piece.rows] = False

    async def _answer(self, source: Answers, nodes: tuple[str, ...], piece: Piece) -> None:
        asked = nodes[piece.lo:piece.hi] if piece.by_node else nodes
        block = await source.series(piece.inp, self.job_id, self.grid.sub(piece.first, piece.rows), asked)
        self.window.place(piece.inp, block, piece.first)
        self.fetched += block.samples
        self.missing[piece.inp.name][piece.first:piece.first + piece.rows, piece.lo:piece.hi] = False

    def _widen(self, gpus: set[tuple[str, str]]) -> None:
        """The window with the columns of ``gpus`` added (GPUs found in older rows only, or joining);
        their nodes' answers did not keep them, so those are missing again (an input selected by job id:
        all of it)."""
        before = {n: i for i, n in enumerate(self._nodes())}
        self.window = self.window.widened(job_columns(list(self.window.columns) + [(self.job_id, n, g) for n, g in gpus]))
        self.expected = len(self.window.columns)
        nodes = self._nodes()
        again = np.asarray([n in {node for node, _ in gpus} for n in nodes])
        held = [i for i, n in enumerate(nodes) if n in before]
        for inp in self.inputs:
            m = self.missing.get(inp.name)
            if m is None:
                continue
            if inp.per_job:
                m[:] = True
                continue
            wide = np.ones((m.shape[0], len(nodes)), bool)
            wide[:, held] = m[:, [before[nodes[i]] for i in held]]
            wide[:, again] = True
            self.missing[inp.name] = wide

    def _columns(self) -> bool:
        """The window, once the GPUs of its first rows are in; False when they are not those held."""
        gpus = {(labels.get("node", ""), labels.get("gpu", "")) for _, b in self.members for labels in b.labels}
        gpus |= {(labels.get("node", ""), labels.get("gpu", "")) for labels in self.ends}
        found = job_columns([(self.job_id, node, gpu) for node, gpu in gpus])
        if self.held is not None and not set(found).issubset(set(self.held)):
            self.changed = True
            return False
        self.window = JobWindow.empty(self.grid, found if self.held is None else self.held)
        for first, block in self.members:
            self.window.place(MEMBER, block, first)
        self.members = []
        nodes = len(self._nodes())
        self.missing = {inp.name: np.full((self.grid.rows, 1 if inp.per_job else nodes), nodes > 0)
                        for inp in self.inputs if inp is not MEMBER}
        return True

    def _nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.window.columns.get_level_values("node")))

    def _series(self) -> dict[str, np.ndarray]:
        """Per input, the series it answers per node of the job (per job for inputs selected by job id)."""
        gpus = pd.Series(self.window.columns.get_level_values("node")).value_counts(sort=False)
        per_node = gpus.reindex(list(self._nodes())).to_numpy()
        out = {}
        for inp in self.inputs:
            each = np.ones_like(per_node) if inp.by == NODE_KEY else per_node
            out[inp.name] = each * inp.fanout if not inp.per_job else np.asarray([max(1, per_node.sum())])
        return out


@dataclass
class Fills:
    """The windows being fetched for the service, one per job, and each job's pace (kept for its life)."""
    held: dict[str, Fill] = field(default_factory=dict)
    paces: dict[str, Pace] = field(default_factory=dict)
    inputs: dict[str, tuple[Input, ...]] = field(default_factory=dict)   # as each job's last fill asked for them
    cut_short: set[str] = field(default_factory=set)   # jobs whose last fill ran out of time (no error): more to do

    def pace(self, job_id: str) -> Pace:
        return self.paces.setdefault(job_id, Pace())

    async def window(self, source: Answers, job_id: str, grid: Window, again: int, deadline: float | None) -> Fill:
        """The job's window on ``grid``: the one held moved on (else a new one) and filled until it is
        whole or ``deadline`` has passed; held until it is whole, also when filling it raises."""
        self.cut_short.discard(job_id)
        fill = self.held.get(job_id)
        fill = fill.moved_to(grid, again) if fill is not None else None
        for _ in range(2):          # once more from nothing when the job's GPUs changed
            if fill is None or fill.changed:
                fill = await Fill.start(source, job_id, grid)
                log.info("fetching a job's window", extra=kv(job_id=job_id, gpus=fill.expected, rows=grid.rows,
                                                               recorded=",".join(i.name for i in fill.inputs if i.recorded)))
            self.held[job_id], self.inputs[job_id] = fill, fill.inputs
            await fill.fill(source, self.pace(job_id), deadline)
            if not fill.changed:
                break
        pace = self.pace(job_id)
        if fill.complete:
            del self.held[job_id]
            log.info("window whole", extra=kv(job_id=job_id, piece_samples=pace.samples, timeouts=pace.timeouts))
        else:
            self.cut_short.add(job_id)
            log.info("window fetched in part", extra=kv(job_id=job_id, coverage=round(fill.coverage(), 3),
                                                         scored=fill.enough(), timeouts=pace.timeouts))
        return fill

    def forget_all_but(self, jobs) -> None:
        for gone in (set(self.held) | set(self.paces) | set(self.inputs)) - set(jobs):
            self.held.pop(gone, None)
            self.paces.pop(gone, None)
            self.inputs.pop(gone, None)
        self.cut_short &= set(self.held)


def continues(held: Window, window: Window) -> bool:
    """Same step and lattice, and the held rows reach into the new window (no gap between them)."""
    offset = (window.start - held.start) / window.step
    return (held.step == window.step and abs(offset - round(offset)) < 1e-6
            and held.start <= window.start <= held.end <= window.end)


async def gpus_now(source: Answers, job_id: str, window: Window) -> Block:
    """The job's GPUs at the window's first and last steps, one small query (sizes the pieces of the
    membership query)."""
    ends = Window(window.start, window.end, max(window.step, window.end - window.start))
    return await source.series(MEMBER, job_id, ends, ())


async def read_inputs(source: Answers, grid: Window, node: str) -> tuple[Input, ...]:
    """The inputs, each from its recorded series where the store records them for the job's ``node`` at
    the grid's step since before its start (a source that cannot tell: all raw)."""
    recorded = getattr(source, "recorded", None)
    names = await recorded(grid.start, grid.step, node) if recorded is not None else set()
    return tuple(inp.as_recorded() if inp.name in names else inp for inp in INPUTS)


def _shift(first: int, block: Block, skip: int, upto: int) -> tuple[int, Block] | None:
    """A membership answer placed at ``first``, on the grid that starts ``skip`` rows later, without its
    rows at or after ``upto`` (asked for again)."""
    rows = block.rows + first
    keep = (rows >= skip) & (rows < upto)
    if not keep.any():
        return None
    return 0, Block(block.labels, block.series[keep], rows[keep] - skip, block.values[keep])


def _present(window: JobWindow) -> JobWindow:
    """``window`` without the columns of GPUs that hold no row of it (they left the job)."""
    keep = window.members()
    return JobWindow(window.grid, window.columns[keep], {n: m[:, keep] for n, m in window.signals.items()},
                     window.seen, {label: (values[keep], seen[keep]) for label, (values, seen) in window.held.items()})
