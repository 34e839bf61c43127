"""One refresh of the analytics service, as plain code over a ``Source`` of job ids and answers.

A refresh at ``now`` scores the window that ends at the last whole step: it lists the jobs, keeps
the valid ids of this replica's shard, continues the loss counters of jobs it has not seen before,
catches up a gap in a job's counters, fetches and scores each job, and replaces the results as a
whole (readers never see half an update). Each job's window is held between refreshes and moved on
with the rows that are new (``lockstep.analytics.service.fetch``); with a fetch budget (the service's),
a new job's window is filled across refreshes and scored on its newest rows until it is whole
(``lockstep.analytics.service.filling``). The service drives it every interval against
Prometheus (``lockstep.analytics.service.source``, ``lockstep.analytics.service.app``), the post-mortem once over a past window
(``lockstep.analytics.evaluation.postmortem``); any ``Source`` can drive it at any ``now``.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

import pandas as pd

from lockstep.analytics.frame.features import Features
from lockstep.analytics.frame.inputs import MEMBER, WRITE_BY_MOUNT, Input
from lockstep.analytics.frame.window import JobWindow
from lockstep.analytics.prom import promql
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.errors import AnswerTooLarge, PrometheusError
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.scoring import checkpoints, imbalance
from lockstep.analytics.scoring.score import JobResult, score_features
from lockstep.analytics.service import targets
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.fetch import advance, fetch_window
from lockstep.analytics.service.filling import Fill, Fills
from lockstep.analytics.service.peers import PeerResults
from lockstep.analytics.service.state import Health, LossCounters
from lockstep.analytics.service.views import JobView, job_view, loss_view, partial_view
from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.analytics")


class Source(Protocol):
    """What a refresh reads. Each method raises ``PrometheusError`` when its answer cannot be had."""

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        """Every job id running at ``at`` (or at any time in the ``lookback_s`` before), as reported (unvalidated)."""

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...]) -> Block:
        """``inp``'s answer for ``job_id`` on its ``nodes``, on ``window``'s grid (``lockstep.analytics.frame.inputs``)."""

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        """The loss counters last exported for those of ``job_ids`` that have any (none: start afresh)."""


class Settings(Protocol):
    """What a refresh reads of the configuration (``ServiceConfig`` has it)."""
    window_s: float     # data scored per refresh
    step_s: float       # the sample period
    shard: Shard        # the jobs this replica scores
    refetch_steps: int  # trailing steps of a held window asked for again
    # optional fetch_budget_s: seconds a refresh spends fetching new windows before it scores what it has
    # (the rest is fetched by the next refreshes); without it, every window is fetched whole at once
    # optional settle_s: a running job's samples are booked in its loss counters once this old (their cost is
    # known once later samples confirmed it: ``lockstep.analytics.scoring.ledger.SETTLE_S``); without it, at once


@dataclass(frozen=True)
class Results:
    jobs: dict[str, JobView]
    updated: float | None = None
    # Copies of the loss counters as of this refresh: /metrics renders in a worker thread while the
    # next refresh adds to (and drops finished jobs from) the live ones.
    losses: dict[str, LossCounters] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)   # per job held: the share of its window fetched


@dataclass
class RefreshState:
    results: Results = field(default_factory=lambda: Results({}))   # replaced as a whole by each refresh
    health: Health = field(default_factory=Health)
    losses: dict[str, LossCounters] = field(default_factory=dict)   # live, per job still running
    baselines: dict[str, float] = field(default_factory=dict)       # a job's last learned productive level
    learned: dict[str, pd.DataFrame] = field(default_factory=dict)  # each job's GPUs' usual pace, job-long
    paces: dict[str, float] = field(default_factory=dict)           # a job's last baseline of its work rate
    windows: dict[str, JobWindow] = field(default_factory=dict)     # each job's matrices, moved on each refresh
    fills: Fills = field(default_factory=Fills)                     # windows not fetched whole yet, and paces
    peers: PeerResults = field(default_factory=PeerResults)         # the fleet pass (shard 0 only), replaced whole


def window_ending(now: float, settings: Settings) -> Window:
    """The window a refresh at ``now`` scores: ``window_s`` up to the last whole step."""
    end = math.floor(now / settings.step_s) * settings.step_s
    return Window(end - settings.window_s + settings.step_s, end, settings.step_s)


def score_window(jobs: dict[str, Features], start: float, step: float, baselines: dict[str, float],
                 learned: dict[str, pd.DataFrame], paces: dict[str, float] | None = None) -> dict[str, JobResult]:
    """Blocking: score each job's features (runs in a worker thread); a job without GPUs is not scored.
    ``baselines``, ``learned`` and ``paces``: what earlier windows taught of each job (``RefreshState``)."""
    out = {}
    for job_id, features in jobs.items():
        if job_id in features.jobs():
            out[job_id] = score_features(features, start, step, [job_id], baselines, learned, paces)[job_id]
    return out


def split_job_ids(seen: list[str], shard: Shard) -> tuple[list[str], list[str]]:
    """This shard's valid job ids, and every invalid one (never queried: a crafted id could rewrite
    a query)."""
    valid, rejected = [], []
    for job_id in seen:
        (valid if promql.JOB_ID.fullmatch(job_id) else rejected).append(job_id)
    return [j for j in valid if shard.owns(j)], rejected


@dataclass
class Refresher:
    source: Source
    settings: Settings
    state: RefreshState = field(default_factory=RefreshState)
    # this refresh's fetching: samples placed, jobs fetched whole (the rest moved on)
    _fetched: int = field(default=0, init=False, repr=False)
    _full: int = field(default=0, init=False, repr=False)
    _deadline: float | None = field(default=None, init=False, repr=False)   # loop time new windows are fetched until
    _too_large: int = field(default=0, init=False, repr=False)   # answers refused for their size
    leave_out: frozenset[str] = frozenset()   # inputs a window fetched whole is fetched without (``with_inputs``)

    async def refresh(self, now: float) -> None:
        """Score the window ending at ``now``; raises when no job could be fetched (the source is down)."""
        state = self.state
        started = time.monotonic()
        self._fetched = self._full = self._too_large = 0
        budget = getattr(self.settings, "fetch_budget_s", None)
        self._deadline = asyncio.get_running_loop().time() + budget if budget is not None else None
        window = window_ending(now, self.settings)
        mine, rejected = split_job_ids(await self.source.list_jobs(window.end), self.settings.shard)
        if rejected and rejected != list(state.health.rejected_job_ids):
            log.warning("job ids rejected (not queried)", extra=kv(job_ids=repr(rejected)[:500]))
        state.losses.update(await self.source.resume([j for j in mine if j not in state.losses], window.end))
        await self._catch_up(mine, window)
        scored, failed = await self.score(mine, window)
        state.fills.forget_all_but(mine)
        filling = state.fills.held
        partial = {j: scored.pop(j) for j in list(scored) if j in filling}
        scored = {job_id: await self.checkpoint_targets(job_id, res) for job_id, res in scored.items()}
        views = self._account(scored, failed, window)
        views.update(self._ended(mine, failed))
        for job_id, res in partial.items():     # scored on part of its window: not counted yet
            views[job_id] = partial_view(res, state.losses.setdefault(job_id, LossCounters()), filling[job_id].coverage())
        for job_id in (filling.keys() - views.keys()) & state.results.jobs.keys():   # not scored again this time
            views[job_id] = state.results.jobs[job_id]
        self._forget_all_but(views.keys() | filling.keys())
        coverage = {j: filling[j].coverage() if j in filling else 1.0 for j in sorted(views.keys() | filling.keys())}
        state.results = Results(views, time.time(), {j: copy.deepcopy(state.losses[j]) for j in views}, coverage)
        state.health = Health(up=True, stale=False, last_success=time.time(), failures=state.health.failures,
                              duration_s=time.monotonic() - started, rejected_job_ids=tuple(rejected),
                              last_error="; ".join(f"job {j}: {e}" for j, e in failed.items())[:2000],
                              fetched_samples=self._fetched, full_fetches=self._full,
                              answers_too_large=state.health.answers_too_large + self._too_large)

    async def score(self, jobs: list[str], window: Window) -> tuple[dict[str, JobResult], dict[str, str]]:
        """Each job's window (moved on from the one held, else fetched whole) scored, and the errors of the
        jobs that could not be fetched; raises when every job fails (the source itself is the problem)."""
        if jobs:
            imbalance.preload()
        features, failed = await self._fetch_jobs(jobs, window)
        scored = await asyncio.to_thread(score_window, features, window.start, self.settings.step_s,
                                         dict(self.state.baselines), dict(self.state.learned), dict(self.state.paces))
        return scored, failed

    async def with_inputs(self, job_id: str, window: Window, inputs: tuple[Input, ...]) -> JobResult | None:
        """The job scored again with ``inputs`` (left out before) added to its window held from ``score``:
        fetched with its membership over the same columns (None: the job has no such window, or its GPUs
        changed in between)."""
        held = self.state.windows.get(job_id)
        if held is None:
            return None
        more = await fetch_window(self.source, job_id, held.grid, held.columns, inputs=(MEMBER, *inputs))
        if more is None:
            return None
        self._fetched += more.fetched
        held.add_inputs(more, inputs)
        scored = await asyncio.to_thread(score_window, {job_id: held.features()}, window.start, self.settings.step_s,
                                         dict(self.state.baselines), dict(self.state.learned), dict(self.state.paces))
        return scored.get(job_id)

    async def checkpoint_targets(self, job_id: str, res: JobResult) -> JobResult:
        """The file system each checkpoint not yet counted wrote to (``lockstep.analytics.service.targets``); a
        checkpoint whose answer fails keeps none (failure stays local)."""
        counters = self.state.losses.get(job_id)
        last = counters.last_checkpoint if counters is not None else None
        after = last["start_timestamp"] + last["duration_s"] if last else float("-inf")
        found = {}
        for i, window in targets.wanted(res, after, self.settings.step_s):
            try:
                block = await self.source.series(WRITE_BY_MOUNT, job_id, window, targets.nodes_of(res))
            except PrometheusError as exc:
                log.warning("checkpoint target not read", extra=kv(job_id=job_id, err=str(exc)[:500]))
                continue
            found[i] = checkpoints.target(targets.written(block))
        return targets.placed(res, found)

    def failed(self, exc: Exception) -> None:
        """A refresh that raised: the last results stay, marked stale."""
        h = self.state.health
        h.up, h.stale, h.failures = False, bool(self.state.results.jobs), h.failures + 1
        h.last_error = f"{type(exc).__name__}: {exc}"
        h.answers_too_large += self._too_large + isinstance(exc, AnswerTooLarge)

    def _account(self, scored: dict[str, JobResult], failed: dict[str, str], window: Window) -> dict[str, JobView]:
        """Each scored job's new samples counted and its view; a job whose queries failed keeps its last
        view and counters (failure stays local)."""
        state, step = self.state, self.settings.step_s
        views = {j: state.results.jobs[j] for j in failed if j in state.results.jobs}
        for job_id, res in scored.items():
            self._remember_baseline(job_id, res)
            counters = state.losses.setdefault(job_id, LossCounters())
            if not counters.behind(window.start):   # else the gap before it is caught up first
                counters.add(res, step, until=res.times[-1] - self._settle_s if len(res.times) else None)
                counters.add_checkpoints(res.checkpoints)
            views[job_id] = job_view(res, counters)
        return views

    @property
    def _settle_s(self) -> float:
        return getattr(self.settings, "settle_s", 0.0)

    def _ended(self, listed: list[str], failed: dict[str, str]) -> dict[str, JobView]:
        """Jobs no longer listed whose newest samples still wait to be booked: booked as last scored, and
        served (their counters' last values exported) this once more before they are forgotten."""
        ended = {}
        for job_id, counters in self.state.losses.items():
            if job_id in listed or job_id in failed or counters.pending is None:
                continue
            counters.settle()
            if (view := self.state.results.jobs.get(job_id)) is not None:
                ended[job_id] = replace(view, loss=loss_view(counters), imbalance=replace(
                    view.imbalance, lost_gpu_seconds=round(counters.imbalance, 1)))
            log.info("job ended; its newest samples booked", extra=kv(job_id=job_id,
                                                                      accounted_until=counters.accounted_until))
        return ended

    def _remember_baseline(self, job_id: str, res: JobResult) -> None:
        """A job's peer baseline, kept for the windows a straggler fills completely, and its GPUs' usual
        pace among their peers, kept for the job's life: a slowdown that began before the current window
        is still a straggler, not imbalance (GPUs absent from this window keep theirs)."""
        if res.baseline is not None:
            self.state.baselines[job_id] = res.baseline
        if res.slowdown is not None and res.slowdown.learned is not None:
            self.state.paces[job_id] = res.slowdown.learned
        old = self.state.learned.get(job_id)
        self.state.learned[job_id] = res.learned if old is None else res.learned.combine_first(old)

    def _forget_all_but(self, jobs: dict[str, JobView]) -> None:
        """Finished jobs (and those no longer this shard's): forget them (label churn, held windows)."""
        for gone in (set(self.state.losses) | set(self.state.windows)) - set(jobs):
            self.state.losses.pop(gone, None)
            self.state.baselines.pop(gone, None)
            self.state.learned.pop(gone, None)
            self.state.paces.pop(gone, None)
            self.state.windows.pop(gone, None)

    async def _catch_up(self, jobs: list[str], window: Window) -> None:
        """Account the time between a job's last counted sample and ``window``'s first (the source was unreachable
        for longer than a window): one window-sized chunk per job and refresh, oldest first, so a long gap
        costs extra refreshes, never one huge query; the job's counters skip the current window until the
        gap is closed. A chunk without data (Prometheus itself was down) is passed over: no data, no
        account; a chunk that fails is retried next time."""
        step = self.settings.step_s
        for job_id in jobs:
            counters = self.state.losses.get(job_id)
            if counters is None or not counters.behind(window.start):
                continue
            # From the last counted sample to the current window's first: counters become rates over the
            # step before each sample, so the first sample of any window is context only (never new to the
            # counters), and the chunk before it counts it.
            first = counters.accounted_until
            chunk = Window(first, min(first + self.settings.window_s - step, window.start), step)
            # scored with the samples after it that settle its last ones' cost, booked up to its end
            scored_span = Window(first, min(chunk.end + math.ceil(self._settle_s / step) * step, window.end), step)
            try:
                held = await fetch_window(self.source, job_id, scored_span, pace=self.state.fills.pace(job_id),
                                          inputs=self.state.fills.inputs.get(job_id))
            except PrometheusError as exc:
                self._too_large += isinstance(exc, AnswerTooLarge)
                log.warning("catch-up failed; retried next refresh", extra=kv(job_id=job_id, err=str(exc)[:500]))
                continue
            self._fetched += held.fetched
            scored = await asyncio.to_thread(score_window, {job_id: held.features()}, chunk.start, step,
                                             dict(self.state.baselines), dict(self.state.learned),
                                             dict(self.state.paces))
            if job_id in scored:
                res = scored[job_id]
                self._remember_baseline(job_id, res)   # older than the current window's, which replaces it after
                counters.add(res, step, until=chunk.end)
                counters.add_checkpoints(res.checkpoints)
            counters.accounted_until = max(counters.accounted_until, chunk.end)
            log.info("caught up", extra=kv(job_id=job_id, start=chunk.start, end=chunk.end,
                                           behind_s=window.start - chunk.end))

    async def _fetch_jobs(self, jobs: list[str], window: Window) -> tuple[dict[str, Features], dict[str, str]]:
        """Features of ``jobs``, one job at a time (a 16,384-GPU job's window is large enough on its own),
        and the errors of those that failed; when every job fails, the source itself is the problem."""
        features, failed = {}, {}
        for job_id in jobs:
            try:
                held = await self._window(job_id, window)
            except PrometheusError as exc:
                self._too_large += isinstance(exc, AnswerTooLarge)
                failed[job_id] = str(exc)
                continue
            if (found := held.features()) is not None:    # a window not whole yet: once its newest rows are in
                features[job_id] = found
        if failed and not features and not self.state.fills.cut_short:
            raise PrometheusError(next(iter(failed.values())))
        if failed:
            log.warning("jobs not refreshed; serving their last results", extra=kv(errors=repr(failed)[:500]))
        return features, failed

    async def _window(self, job_id: str, window: Window) -> JobWindow | Fill:
        """The job's window held, moved on to ``window``; fetched whole when it cannot be (with a fetch
        budget, across refreshes: a ``Fill`` while it is not whole yet)."""
        held, fills = self.state.windows.get(job_id), self.state.fills
        moved = await advance(self.source, held, job_id, window, self.settings.refetch_steps, fills.pace(job_id),
                              fills.inputs.get(job_id)) if held is not None else None
        if moved is None and self._deadline is None:
            moved = await fetch_window(self.source, job_id, window, leave_out=self.leave_out)
            self._full += 1
        elif moved is None:
            self.state.windows.pop(job_id, None)
            fill = await fills.window(self.source, job_id, window, self.settings.refetch_steps, self._deadline)
            if not fill.complete:
                self._fetched += fill.fetched
                return fill
            moved = fill.result()
            self._full += 1
        self._fetched += moved.fetched
        self.state.windows[job_id] = moved
        return moved
