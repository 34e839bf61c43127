"""The refresh algorithm on its own (``lockstep.analytics.service.refresh``): no app, no Prometheus. The source answers
the inputs' queries over a simulated run (tests/fixtures/analytics/service.yaml: 4 nodes x 8 GPUs for
600 s, a checkpoint every 240 s, GPU node01/3 throttled from 300 s to the end) the way ``query_range``
answers them (``lockstep.analytics.evaluation.emulate``), and records the windows the refresh asked for. Jobs' windows
are held between refreshes: a window fetched whole, then only its last step again and what is new.
tests/analytics/service/test_app.py runs the same code against a real Prometheus."""
from __future__ import annotations

import dataclasses
import logging

import pandas as pd
import pytest

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom.api import PrometheusError, Window
from lockstep.analytics.prom.decode import Block, decode_matrix
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.refresh import Refresher
from lockstep.analytics.service.state import LossCounters
from tests.helpers.analytics_service import EVIL, Settings
from tests.helpers.frame_answers import answers_for

pytestmark = pytest.mark.long(45)

GPUS = 32


@pytest.fixture(scope="module")
def run(service_sim):
    return service_sim


def as_job(frame: pd.DataFrame, job_id: str) -> pd.DataFrame:
    """The run as if the scheduler had named its job ``job_id``."""
    return frame.assign(job_id=frame["job_id"].astype(str).replace("7300", job_id))


class FakeSource:
    """Answers as Prometheus would: on the step grid of each window, nothing while ``down``; the
    heavy query of a job in ``failing`` is refused as Prometheus refuses a query that loads too much.
    ``fetched``: the windows of those heavy queries (one per fetch of a job's window)."""

    HEAVY = "sm"

    def __init__(self, frames: dict[str, pd.DataFrame], exported: dict[str, LossCounters] | None = None) -> None:
        self.frames, self.exported = frames, exported or {}
        self.listed = list(frames)
        self.failing: set[str] = set()
        self.malformed: dict[str, bytes] = {}   # job -> the body its heavy query is answered with
        self.down: tuple[float, float] | None = None
        self.fetched: list[tuple[str, float, float]] = []
        self.resumed: list[list[str]] = []

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return list(self.listed)

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...]) -> Block:
        if inp.name == self.HEAVY:
            self.fetched.append((job_id, window.start, window.end))
            if job_id in self.failing:
                raise PrometheusError("HTTP 422: query processing would load too many samples into memory")
            if job_id in self.malformed:
                return decode_matrix(self.malformed[job_id], window)
        return answers_for(self.frames[job_id], self.down).answer(inp, window, job_id, nodes)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        self.resumed.append(list(job_ids))
        return {j: self.exported[j] for j in job_ids if j in self.exported}


# The run as each job, one frame per job for the module (its answers are computed once: tests.helpers.frame_answers).
_FRAMES: dict[tuple[int, str], tuple[pd.DataFrame, pd.DataFrame]] = {}


def _jobs(run, *job_ids: str) -> dict[str, pd.DataFrame]:
    """The run as each of ``job_ids``, the same frame for the same job each time."""
    for j in job_ids:
        if (id(run.frame), j) not in _FRAMES:
            _FRAMES[id(run.frame), j] = run.frame, as_job(run.frame, j)
    return {j: _FRAMES[id(run.frame), j][1] for j in job_ids}


def _end(run) -> float:
    return run.start + run.truth["duration_s"]


@pytest.mark.slow
async def test_each_replica_scores_only_its_shard_and_never_queries_a_rejected_id(run, caplog):
    ids = ("7300", "4242", "4242+0", "4242_7", "job.a")
    scored = {}
    for index in (0, 1):
        source = FakeSource(_jobs(run, *ids))
        source.listed.append(EVIL)
        refresher = Refresher(source, Settings(window_s=60, shard=Shard(index, 2)))
        with caplog.at_level(logging.WARNING, "lockstep.analytics"):
            caplog.clear()
            await refresher.refresh(_end(run))
            await refresher.refresh(_end(run))
        scored[index] = set(refresher.state.results.jobs)
        assert {j for j, _, _ in source.fetched} == scored[index]
        assert all(EVIL not in asked for asked in source.resumed)
        assert refresher.state.health.rejected_job_ids == (EVIL,)
        assert [r.message for r in caplog.records].count("job ids rejected (not queried)") == 1   # not each refresh
    # crc32(id) % 2, computed with zlib: stable across replicas and restarts
    assert scored == {0: {"7300", "4242_7", "job.a"}, 1: {"4242", "4242+0"}}


@pytest.mark.slow
async def test_a_job_that_fails_keeps_its_last_view_and_counters_while_the_others_refresh(run):
    source = FakeSource(_jobs(run, "7300", "7301"))
    refresher = Refresher(source, Settings(window_s=120))
    await refresher.refresh(_end(run) - 60)
    before = refresher.state.results
    source.failing = {"7301"}
    await refresher.refresh(_end(run))
    state = refresher.state
    assert state.results.jobs["7301"] is before.jobs["7301"] and state.results.jobs["7301"].time == _end(run) - 60
    assert state.losses["7301"].accounted_until == _end(run) - 60
    assert state.results.jobs["7300"].time == _end(run) and state.losses["7300"].accounted_until == _end(run)
    assert state.health.up and not state.health.stale
    assert state.health.last_error.startswith("job 7301: HTTP 422")


# What a broken proxy or store has answered instead of a matrix, each in the shape that used to raise
# KeyError, IndexError, ValueError or RecursionError out of the whole refresh.
MALFORMED = {
    "no data": b'{"status":"success"}',
    "values not numbers": b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0"},'
                          b'"values":[[1767225890,"fast"]]}]}}',
    "values one-dimensional": b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
                              b'"values":[1767225890,"1"]}]}}',
    "nested past the stack": b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.slow
async def test_a_malformed_answer_for_one_job_loses_that_job_alone(run):
    """In a steady refresh and in a catch-up alike, whatever the malformation (one per refresh): the
    other job is scored and accounted to the end, and the broken one catches up once it answers again."""
    source = FakeSource(_jobs(run, "7300", "7301"))
    refresher = Refresher(source, Settings(window_s=120))
    await refresher.refresh(run.start + 120)
    for i, case in enumerate(sorted(MALFORMED) * 2):
        source.malformed = {"7301": MALFORMED[case]}
        await refresher.refresh(run.start + 360 if i == 0 else _end(run))   # a gap first: caught up window by window
        assert refresher.state.health.up and refresher.state.health.last_error.startswith("job 7301: "), case
    state = refresher.state
    assert state.results.jobs["7300"].time == state.losses["7300"].accounted_until == _end(run)
    assert state.results.jobs["7301"].time == state.losses["7301"].accounted_until == run.start + 120
    source.malformed = {}
    for _ in range(6):
        await refresher.refresh(_end(run))
    assert refresher.state.losses["7301"].accounted_until == _end(run)


async def test_every_job_failing_fails_the_refresh_and_keeps_the_results_marked_stale(run):
    source = FakeSource(_jobs(run, "7300", "7301"))
    refresher = Refresher(source, Settings(window_s=120))
    await refresher.refresh(_end(run) - 60)
    before = refresher.state.results
    source.failing = {"7300", "7301"}
    with pytest.raises(PrometheusError) as exc:
        await refresher.refresh(_end(run))
    refresher.failed(exc.value)
    health = refresher.state.health
    assert refresher.state.results is before
    assert (health.up, health.stale, health.failures) == (False, True, 1)
    assert health.last_error.startswith("PrometheusError: HTTP 422")


@pytest.mark.slow
async def test_a_gap_is_caught_up_one_window_per_refresh_oldest_first(run):
    """A refresh at 120 s, the next at 600 s with a 125 s window: the 360 s between are fetched in
    window-sized chunks from the last counted sample (120 s) up to the current window's first sample
    (480 s), one per refresh; the current window is counted once the gap is closed, from its second
    sample (its first is context only, the last chunk counted it). The held window of 0-120 s does
    not reach the new one: that is fetched whole once, then only its last step (600 s, a scrape that
    may have come late) again. The account ends exactly as refreshes every 30 s without a gap leave it."""
    source = FakeSource(_jobs(run, "7300"))
    refresher = Refresher(source, Settings(window_s=125))
    await refresher.refresh(run.start + 120)
    assert refresher.state.losses["7300"].allocated == 120 * GPUS
    for _ in range(4):
        await refresher.refresh(_end(run))
    assert [(s - run.start, e - run.start) for _, s, e in source.fetched] == [
        (0, 120), (120, 240), (480, 600), (240, 360), (600, 600), (360, 480), (600, 600), (600, 600)]
    counters, truth = refresher.state.losses["7300"], run.truth["loss"]
    steady = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=125))
    for at in range(120, 601, 30):
        await steady.refresh(run.start + at)
    # the checkpoints' figures are measured within each window (float32 sums over other samples): equal to the
    # last few bytes of a terabyte; everything else is exactly what the steady service counts
    again = steady.state.losses["7300"]
    assert counters.checkpoints == again.checkpoints > 0
    assert counters.checkpoint_bytes == pytest.approx(again.checkpoint_bytes, rel=1e-6)
    assert counters.checkpoint_seconds == pytest.approx(again.checkpoint_seconds, rel=1e-6)
    assert dataclasses.replace(counters, checkpoint_bytes=0.0, checkpoint_seconds=0.0, last_checkpoint=None) == \
        dataclasses.replace(again, checkpoint_bytes=0.0, checkpoint_seconds=0.0, last_checkpoint=None)
    assert counters.accounted_until == _end(run)
    assert counters.allocated == truth["allocated_gpu_seconds"] == 600 * GPUS
    for cause, want in truth["lost_gpu_seconds"].items():
        assert abs(counters.lost[cause] - want) <= max(0.1 * want, 0.002 * truth["allocated_gpu_seconds"]), cause


@pytest.mark.slow
async def test_a_catch_up_chunk_that_fails_is_retried_and_one_without_data_is_passed_over(run):
    source = FakeSource(_jobs(run, "7300"))
    source.down = (run.start + 120, run.start + 360)   # Prometheus itself was down: no samples
    refresher = Refresher(source, Settings(window_s=125))
    await refresher.refresh(run.start + 120)
    source.failing = {"7300"}
    with pytest.raises(PrometheusError):
        await refresher.refresh(_end(run))
    source.failing = set()
    for _ in range(3):
        await refresher.refresh(_end(run))
    # the refused refresh held nothing new: the retry fetches the current window whole again
    assert [(s - run.start, e - run.start) for _, s, e in source.fetched][1:] == [
        (120, 240), (480, 600), (120, 240), (480, 600), (240, 360), (600, 600), (360, 480), (600, 600)]
    counters = refresher.state.losses["7300"]
    assert counters.accounted_until == _end(run)
    missing = len(range(125, 360, 5))   # samples Prometheus never took: their seconds are not accounted
    assert counters.allocated == (600 - missing * 5) * GPUS


async def test_a_newly_seen_job_continues_its_exported_counters(run):
    """A replica restarted at 600 s; the counters it exported up to 120 s are continued, not restarted."""
    exported = LossCounters(accounted_until=run.start + 120, allocated=120 * GPUS)
    source = FakeSource(_jobs(run, "7300"), exported={"7300": exported})
    refresher = Refresher(source, Settings(window_s=125))
    await refresher.refresh(_end(run))
    assert source.fetched[0] == ("7300", run.start + 120, run.start + 240)   # catching up from there
    assert refresher.state.losses["7300"].allocated == 240 * GPUS
    await refresher.refresh(_end(run))
    assert source.resumed == [["7300"], []]   # once, when first seen


@pytest.mark.slow
async def test_the_newest_samples_wait_to_settle_and_are_booked_when_the_job_ends(run):
    """Booked once 60 s old while the job runs; when it is no longer listed, the samples still waiting are
    booked, its last view and counters served once more, then forgotten. The account ends where booking
    every sample at once ends it."""
    source = FakeSource(_jobs(run, "7300"))
    refresher = Refresher(source, Settings(window_s=125, settle_s=60))
    for at in range(120, 601, 30):
        await refresher.refresh(run.start + at)
    counters = refresher.state.losses["7300"]
    assert counters.accounted_until == _end(run) - 60 and counters.allocated == 540 * GPUS
    assert counters.pending is not None
    source.listed = []
    await refresher.refresh(_end(run) + 30)
    state = refresher.state
    assert counters.pending is None and counters.accounted_until == _end(run)
    assert state.losses["7300"] is counters and state.results.losses["7300"] == counters
    assert state.results.jobs["7300"].loss.allocated_gpu_seconds == 600 * GPUS
    at_once = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=125))
    for at in range(120, 601, 30):
        await at_once.refresh(run.start + at)
    assert counters.allocated == at_once.state.losses["7300"].allocated
    assert sum(v for by_cause in counters.ledger.values() for v in by_cause.values()) == \
        pytest.approx(counters.allocated)
    await refresher.refresh(_end(run) + 60)
    assert "7300" not in refresher.state.losses and "7300" not in refresher.state.results.jobs


async def test_finished_jobs_are_forgotten(run):
    source = FakeSource(_jobs(run, "7300", "7301"))
    refresher = Refresher(source, Settings(window_s=300))
    await refresher.refresh(run.start + 300)
    assert set(refresher.state.baselines) == {"7300", "7301"}
    source.listed = ["7300"]
    await refresher.refresh(run.start + 330)
    state = refresher.state
    assert set(state.results.jobs) == set(state.losses) == set(state.baselines) == set(state.results.losses) == {"7300"}
    assert set(state.windows) == {"7300"}


async def test_the_baseline_learned_earlier_scores_a_window_that_a_straggler_fills(run):
    """From 300 s on, the throttled GPU slows the whole job: a window of only those samples has no
    clean stretch to learn the productive level from. Learned from the window before, the level
    turns the slowdown into straggler loss as the simulator's truth counts it; without it, a fresh
    replica takes the slowed level for productive, and counts the loss only because the GPU's
    hardware explains its slowness (a thermal throttle: a hardware straggler since the window's start,
    whose cost is read off the ranks' step times)."""
    truth = run.truth["loss"]["lost_gpu_seconds"]["straggler"]
    kept = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=300))
    await kept.refresh(run.start + 300)
    learned = kept.state.baselines["7300"]
    await kept.refresh(_end(run))
    assert kept.state.baselines["7300"] == learned
    assert kept.state.losses["7300"].lost["straggler"] == pytest.approx(truth, rel=0.05)

    # A fresh replica sees the throttled GPU slow from the first sample of its window: its pace is that
    # GPU's usual one, so the whole window counts as clean and the slowed level is learned as productive;
    # its thermal reasons and low clock make it a hardware straggler since the start all the same.
    fresh = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=295))
    await fresh.refresh(_end(run))
    assert fresh.state.baselines.get("7300", 0.0) < 0.95 * learned
    assert fresh.state.losses["7300"].lost["straggler"] == pytest.approx(truth, rel=0.2)


async def test_the_gpus_usual_pace_learned_earlier_holds_across_held_windows(run):
    """The throttled GPU's usual pace is learned from the windows before 300 s and kept while the
    job's window is moved on: at the end, with every sample of the window slowed, it is still a
    straggler, not imbalance. A fresh replica whose one window starts after the slowdown has no such
    history: to it the GPU has been slow since it started, a straggler only because its hardware
    explains it (thermal reasons, its clock below its peers'), never imbalance."""
    kept = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=295))
    for t in (300, 450, 600):
        await kept.refresh(run.start + t)
    assert kept.state.health.full_fetches == 0 and set(kept.state.learned) == {"7300"}
    fresh = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=295))
    await fresh.refresh(_end(run))
    held, once = kept.state.results.jobs["7300"], fresh.state.results.jobs["7300"]
    assert [(g.node, g.gpu) for g in held.stragglers] == [("node01", "3")] and held.imbalance.ranks == ()
    assert [(g.node, g.gpu, g.cause) for g in once.stragglers] == [("node01", "3", "hardware")]
    assert once.imbalance.ranks == ()


async def test_a_held_window_asks_again_for_its_last_steps_and_counts_them_once(run):
    """Where samples reach the store late (remote_write batching), the last --refetch-steps rows held are
    fetched again with the new ones; they replace what was held and are counted once."""
    source = FakeSource(_jobs(run, "7300"))
    again = Refresher(source, dataclasses.replace(Settings(window_s=125), refetch_steps=3))
    await again.refresh(run.start + 300)
    await again.refresh(run.start + 330)
    assert [(s - run.start, e - run.start) for _, s, e in source.fetched] == [(180, 300), (290, 330)]
    whole = Refresher(FakeSource(_jobs(run, "7300")), Settings(window_s=125))
    await whole.refresh(run.start + 300)
    whole.state.windows.clear()
    await whole.refresh(run.start + 330)
    assert again.state.results.jobs == whole.state.results.jobs and again.state.losses == whole.state.losses
    assert again.state.losses["7300"].allocated == 150 * GPUS      # 180 s is context: 185..330
