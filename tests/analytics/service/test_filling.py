"""A new job's first fetch across refreshes (``lockstep.analytics.service.filling``), on a source double
that answers the inputs' queries over a simulated run as ``query_range`` would
(``lockstep.analytics.evaluation.emulate``) and times out any answer larger than a limit, as a busy
store does that cannot answer it within the request timeout. Every answer is recorded cell by cell
(input, sample time, node): a cell answered twice is a piece asked for again after it succeeded."""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

import pytest

from lockstep.analytics.frame.inputs import INPUTS, MEMBER, MEMBER_ELSEWHERE, MEMBER_ON_NODES, Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.errors import PrometheusError, QueryTimeout
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.filling import ENOUGH_S
from lockstep.analytics.service.pieces import Pace
from lockstep.analytics.service.refresh import Refresher
from tests.helpers.frame_answers import answers_for

JOB = "7300"


@dataclass(frozen=True)
class Settings:
    window_s: float = 605.0
    step_s: float = 5.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1
    fetch_budget_s: float = 60.0


@dataclass(frozen=True)
class Whole:
    """The settings of a refresh without a fetch budget: every window fetched whole at once."""
    window_s: float = 605.0
    step_s: float = 5.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1


@pytest.fixture(scope="module")
def run(service_sim):
    return service_sim


class SizedSource:
    """Answers over the run; an answer of more than ``limit`` samples times out; after ``fail_after``
    answers every query is refused (the store went away); an answer whose rows all lie at or before
    ``slow_until`` (but the membership's) takes ``delay`` seconds."""

    def __init__(self, run, limit: int = 10**9) -> None:
        self.frame_answers = answers_for(run.frame)
        self.nodes = sorted(run.frame.loc[run.frame["job_id"].astype(str) == JOB, "node"].astype(str).unique())
        self.limit, self.fail_after, self.answers, self.timeouts = limit, None, 0, 0
        self.slow_until, self.delay = None, 0.0
        self.cells: list[tuple[str, float, str]] = []
        self.asked: list[tuple[Input, Window, tuple[str, ...]]] = []

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return [JOB]

    async def resume(self, job_ids: list[str], at: float) -> dict:
        return {}

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...]) -> Block:
        if self.fail_after is not None and self.answers >= self.fail_after:
            raise PrometheusError("connection refused")
        block = self.frame_answers.answer(inp, window, job_id, nodes or None)
        if block.samples > self.limit:
            self.timeouts += 1
            raise QueryTimeout("query_range: TimeoutError")
        self.asked.append((inp, window, nodes))             # answered
        if self.slow_until is not None and inp.name != "member" and window.end <= self.slow_until:
            await asyncio.sleep(self.delay)
        self.answers += 1
        if window.step == run_step(window):     # not the sizing query (the job's GPUs at the window's two ends)
            asked = self.nodes if inp.per_job or not nodes else nodes
            self.cells += [(inp.name, float(t), n) for t in window.times() for n in asked]
        return block


def run_step(window: Window) -> float:
    return 5.0 if window.end > window.start else window.step


def _end(run) -> float:
    return run.start + run.truth["duration_s"]


def _reference(run, at: float, settings=Whole()):
    refresher = Refresher(SizedSource(run), settings)
    return refresher, asyncio.ensure_future(refresher.refresh(at))


async def _whole(run, at: float) -> Refresher:
    refresher = Refresher(SizedSource(run), Whole())
    await refresher.refresh(at)
    return refresher


async def test_a_first_fetch_completes_through_repeated_timeouts_without_starting_over(run):
    """Every answer over 1,500 samples times out (the job's window is 32 GPUs x 122 steps): the pieces
    are split until they fit, the first refresh scores the whole window, and no cell is answered twice.
    The result is the one of a refresh fetching the window whole from a store that never times out."""
    source = SizedSource(run, limit=1_500)
    refresher = Refresher(source, Settings())
    await refresher.refresh(_end(run))
    state = refresher.state
    assert state.health.up and state.health.full_fetches == 1 and state.results.coverage == {JOB: 1.0}
    assert source.timeouts >= 3 and state.fills.paces[JOB].samples <= 1_500
    twice = [cell for cell, n in Counter(source.cells).items() if n > 1]
    assert twice == []
    whole = await _whole(run, _end(run))
    assert state.results.jobs == whole.state.results.jobs and state.losses == whole.state.losses
    assert state.results.jobs[JOB].coverage == 1.0


@pytest.mark.slow
async def test_what_a_failed_refresh_fetched_is_kept_and_only_the_missing_pieces_are_asked_next(run):
    """The store goes away after 20 answers: the refresh fails. The next one, 30 s later, moves what
    was fetched on to its window and asks only for what is missing: the new rows, the last row held
    again (a scrape that came late), nothing that left the window, nothing twice."""
    source = SizedSource(run, limit=1_500)
    source.fail_after = 20
    refresher = Refresher(source, Settings())
    first = _end(run) - 30
    with pytest.raises(PrometheusError, match="connection refused"):
        await refresher.refresh(first)
    before, source.cells, source.fail_after = set(source.cells), [], None
    assert refresher.state.fills.held[JOB].coverage() < 1.0
    await refresher.refresh(_end(run))
    after = source.cells
    assert len(after) == len(set(after))
    assert {t for _, t, _ in before & set(after)} == {first}            # the last row held, asked again
    assert min(t for _, t, _ in after) >= _end(run) - 600               # nothing that left the window
    whole = await _whole(run, _end(run))
    assert refresher.state.results.jobs == whole.state.results.jobs
    assert refresher.state.losses == whole.state.losses


@pytest.mark.slow
async def test_a_partial_result_is_served_with_its_coverage_and_counted_only_once_whole(run):
    """With a fetch budget shorter than the older rows take to answer, each refresh gets part of the
    window: once the newest rows of every input are in, the job is scored on them (its coverage with
    it, its loss not counted yet); the refreshes after go on where the last one stopped, and the whole
    window is scored and counted exactly as when it is fetched at once. Every answer of the older rows
    outlasts the budget, so a refresh ends with at most one round of them (``Pace.concurrency``, fewer
    than the older rows' pieces) however fast or slow the machine is."""
    source = SizedSource(run)
    source.slow_until, source.delay = _end(run) - ENOUGH_S, 1.0     # every row but the newest ENOUGH_S
    refresher = Refresher(source, Settings(fetch_budget_s=0.3))
    refresher.state.fills.paces[JOB] = Pace(samples=2_000)
    seen = []
    for _ in range(40):                           # bounded: each refresh answers at least one piece of each phase
        await refresher.refresh(_end(run))
        results = refresher.state.results
        seen.append((results.coverage[JOB], results.jobs.get(JOB), results.losses.get(JOB)))
        if results.coverage[JOB] == 1.0:
            break
    partial = [(c, view, loss) for c, view, loss in seen if c < 1.0 and view is not None]
    assert partial and seen[-1][0] == 1.0
    for coverage, view, loss in partial:      # a partial result is scored again at most every RESCORE_S
        assert ENOUGH_S / 605 <= view.coverage <= coverage + 1e-4 and view.time == _end(run)
        assert coverage < 1.0 and loss.allocated == 0.0
    assert [(s.node, s.gpu) for s in refresher.state.results.jobs[JOB].stragglers] == [("node01", "3")]
    assert len(source.cells) == len(set(source.cells))      # the same window each time: nothing asked again
    whole = await _whole(run, _end(run))
    assert refresher.state.results.jobs == whole.state.results.jobs
    assert refresher.state.losses == whole.state.losses


async def test_a_gpu_found_only_in_the_older_rows_is_added_not_started_over(run):
    """The newest rows come first, and with the GPUs held at the window's two ends they make the columns.
    A GPU that held the job only in between is found with the older rows: it is added as a column and its
    node's answers asked for again, nothing else; the window is the one fetched whole at once."""
    frame = run.frame
    gone = (frame["metric"] == "lockstep_gpu_job_info") & (frame["node"] == "node02") & (frame["gpu"] == "7") & \
        ~frame["timestamp"].between(run.start + 60, _end(run) - ENOUGH_S - 60)
    run_ = type(run)(run.scenario, frame[~gone], run.truth, run.start, run.period)
    source = SizedSource(run_)
    refresher = Refresher(source, Settings())
    refresher.state.fills.paces[JOB] = Pace(samples=2_000)
    await refresher.refresh(_end(run))
    assert refresher.state.results.coverage == {JOB: 1.0}
    again = {(inp, node) for (inp, _, node), n in Counter(source.cells).items() if n > 1}
    per_job = {inp.name for inp in INPUTS if inp.per_job}                # asked for by job id: every node
    assert {node for inp, node in again if inp not in per_job} == {"node02"}
    whole = Refresher(SizedSource(run_), Whole())
    await whole.refresh(_end(run))
    assert refresher.state.results.jobs == whole.state.results.jobs and refresher.state.losses == whole.state.losses
    assert ("node02", "7") in [(g.node, g.gpu) for g in refresher.state.results.jobs[JOB].gpus]


async def test_a_window_fetched_whole_asks_for_its_gpus_by_node_and_finds_those_elsewhere(run):
    """Fetched whole (a post-mortem's window, a service's without a fetch budget), a window's GPUs are asked for
    by groups of the nodes whose GPUs held the job at its two ends, every row at once, then on every other node.
    A node whose GPUs held the job only in between is found by the second query; the window is the one the
    pieces of time make (a fetch budget's)."""
    frame = run.frame
    nodes = sorted(frame.loc[frame["job_id"].astype(str) == JOB, "node"].astype(str).unique())
    between = frame["timestamp"].between(run.start + 60, _end(run) - ENOUGH_S - 60)
    gone = (frame["metric"] == "lockstep_gpu_job_info") & (frame["node"] == nodes[-1]) & ~between
    run_ = type(run)(run.scenario, frame[~gone], run.truth, run.start, run.period)
    source = SizedSource(run_, limit=1_500)
    whole = Refresher(source, Whole())
    await whole.refresh(_end(run))
    members = [(inp, window, asked) for inp, window, asked in source.asked
               if inp.name == MEMBER.name and window.step == 5.0]       # not the ends' query
    on = [(window, asked) for inp, window, asked in members if inp is MEMBER_ON_NODES]
    elsewhere = [(window, asked) for inp, window, asked in members if inp is MEMBER_ELSEWHERE]
    assert on and elsewhere and len(on) + len(elsewhere) == len(members)      # none by job id alone
    assert sorted(n for _, asked in on for n in asked) == nodes[:-1]           # each node's GPUs once
    assert {window.rows for window, _ in on} == {121}                          # every row at once
    assert {asked for _, asked in elsewhere} == {tuple(nodes[:-1])}            # every node but those, left out
    assert source.timeouts >= 1                                                # a piece split on the way
    found = {(g.node, g.gpu) for g in whole.state.results.jobs[JOB].gpus}
    assert {node for node, _ in found} == set(nodes)
    budgeted = Refresher(SizedSource(run_), Settings(fetch_budget_s=3600.0))
    await budgeted.refresh(_end(run))
    assert budgeted.state.results.coverage == {JOB: 1.0}
    assert not [inp for inp, _, _ in budgeted.source.asked if inp in (MEMBER_ON_NODES, MEMBER_ELSEWHERE)]
    assert whole.state.results.jobs == budgeted.state.results.jobs and whole.state.losses == budgeted.state.losses
