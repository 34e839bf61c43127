"""Parity, all live: scores from a real Prometheus scraping one real node agent per node of a running
``lockstep sim run`` agree with the scores of the simulator's own series for the same scenario.

tests/analytics/service/test_app.py holds the scorer to bit-for-bit parity on a Prometheus filled by
promtool backfill; here the exporters, the scrapes and their timing are in the path too. Gauges
reach Prometheus unchanged, but each target is scraped at its own offset within a tick, so one node
may be a tick behind another in the same query sample: the check is the one an operator cares
about, the same GPU flagged with the same score at about the same time.
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np
import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.evaluation.evaluate import Run, simulate
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.frame.features import Features
from lockstep.analytics.frame.inputs import INPUTS
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.scoring.score import MIN_CLEAN, JobResult, score_features
from lockstep.analytics.service.fetch import fetch_window
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.catalog import analytics, fabric, nccl_inspector
from lockstep.stack import Stack, query, start_prometheus, wait_on
from tests.helpers.paths import FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.long(55)]

SCENARIO = FIXTURES / "analytics/parity-live.yaml"
JOB = "5150"
# Simulated seconds per wall second: the 220 s scenario (5 s samples) runs in 44 s, one tick a second.
SPEED = 5.0
# Tick k is written at k wall ticks after the start and queried at k + PHASE. A target whose scrape
# offset within the tick falls before PHASE is read for that query after tick k was written; one
# whose offset falls after was last read during tick k-1. Half a tick leaves half a tick for the
# agent to answer before tick k+1 is written.
PHASE = 0.5
# Ticks a sample may lag its query time: 1 from the scrape offset, 1 more when the simulator writes
# a tick late on a loaded machine; and one tick ahead (-1) when an agent on a loaded machine takes
# over half a tick to answer a scrape, reading tick k+1's files for a scrape stamped before k+PHASE.
MAX_LAG = 2
MIN_LAG = -1
# Gauges arrive exact, but a node a tick behind the other moves the peers' reference by about the
# scores' tick-to-tick noise over the clean stretch (0.008): twice that.
SCORE_TOLERANCE = 0.02
STARTUP_S = 120.0        # sim, agents and Prometheus starting on a loaded 2-core machine


@dataclass(frozen=True)
class Paths:
    run: Run
    first: int                  # first and last tick both paths score
    last: int
    prom: Features              # the service's fetch, on the series' clock (_sim_clock)
    raw_tx: Block               # Prometheus' samples of the rails' transmit counters, row i at tick first + i
    direct_frame: pd.DataFrame  # the series over the same ticks
    direct_features: Features
    via_prom: JobResult
    direct: JobResult


def _job_gpus_seen(url: str) -> int:
    result = query(url, f'count(lockstep_gpu_job_info{{job_id="{JOB}"}})')
    return int(float(result[0]["value"][1])) if result else 0


async def _fetch(url: str, window: source_prom.Window) -> tuple[Features, Block]:
    async with aiohttp.ClientSession() as session:
        held = await fetch_window(PrometheusSource(session, url, 30.0), JOB, window)
        raw = await source_prom.query_range(session, url, f'{fabric.IB_TRANSMIT_BYTES.name}{{job="lockstep-node"}}',
                                            window, 30.0)
    return held.features(), raw


def _live_run(workdir: Path, run: Run, last: int) -> tuple[Features, Block, float, float, int]:
    """The job's features as the service fetches them from a Prometheus scraping the live run up to
    tick ``last``, the raw transmit counters, the run's wall-clock start, its wall tick, and the first
    tick every node was scraped by."""
    with Stack() as stack:
        root = workdir / "root"
        sim = localcluster.start_sim(SCENARIO, root, stack, speed=SPEED)
        cluster = json.loads((root / "cluster.json").read_text())
        start, tick = cluster["start_timestamp"], cluster["sample_period_s"] / cluster["speed"]
        agents = localcluster.start_node_agents(root, stack, extra_args=("--collector.nccl-ras",))
        # One scrape per tick: each target sees every tick once (scraping faster only repeats them).
        targets = {node: localcluster.host_port(agent) for node, agent in agents.items()}
        config = localcluster.prometheus_config(targets, scrape_interval=f"{round(tick * 1000)}ms")
        prom = stack.add(start_prometheus(config, workdir / "prom"))
        services = [sim, prom, *agents.values()]
        (job,) = run.truth["jobs"]
        gpus = len(job["nodes"]) * job["gpus_per_node"]
        wait_on(lambda: _job_gpus_seen(prom.url) == gpus, STARTUP_S, f"Prometheus to hold all {gpus} job GPUs",
              services)
        first = math.ceil((time.time() - start) / tick - PHASE)
        wait_on(lambda: not sim.alive(), STARTUP_S + last * tick, "the simulation to end", services)
        assert sim.proc.returncode == 0, sim.log_tail()
        # The simulator exits once its last tick is written; a scrape interval after that tick's query
        # time, the scrape the query reads is stored.
        time.sleep(max(0.0, start + (last + PHASE + 1) * tick - time.time()))
        window = source_prom.Window(start + (first + PHASE) * tick, start + (last + PHASE) * tick, tick)
        return (*asyncio.run(_fetch(prom.url, window)), start, tick, first)


RATES = {i.name for i in INPUTS if i.kind == "rate"}


def _sim_clock(features: Features, run: Run, start: float, tick: float) -> Features:
    """Prometheus' wall-clock times → the series' clock: the query for tick k becomes
    ``run.start + k * period``, inverting the simulator's clock (tick k is written at
    ``start + k * period / speed``). Counter rates become per simulated second as in the direct path
    (at --speed N a counter grows N times faster per wall second), and the persistence and loss
    arithmetic runs on simulated seconds; gauges are the same on either clock."""
    k = np.rint((features.times - start) / tick - PHASE)
    signals = {name: m / np.float32(SPEED) if name in RATES else m for name, m in features.signals.items()}
    return Features(run.start + k * run.period, features.columns, signals)


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> Paths:
    run = simulate(SCENARIO)
    last = round(run.truth["duration_s"] / run.period)
    live, raw_tx, start, tick, first = _live_run(tmp_path_factory.mktemp("parity"), run, last)
    (straggler,) = run.truth["stragglers"]
    clean = round(straggler["start_s"] / run.period) - first + 1
    assert clean >= MIN_CLEAN, (f"the stack took {first * tick:.0f} s to start: {clean} clean ticks scraped "
                                f"before the throttle, the scorer needs {MIN_CLEAN} to learn the job's level")
    prom = _sim_clock(live, run, start, tick)
    covered = run.frame["timestamp"].between(run.start + first * run.period, run.start + last * run.period)
    # The series holds each rank's step time as the training job would export it and NCCL Inspector's times as
    # the nccl-inspector collector serves them; the live cluster runs neither (its node agents serve the
    # hardware), so the direct path goes without them too.
    job_side = (analytics.RANK_STEP_SECONDS.name, nccl_inspector.EXEC_TIME.name)
    direct_frame = run.frame[covered & ~run.frame["metric"].isin(job_side)]
    direct_features = build_features(direct_frame)
    via_prom = score_features(prom, run.start, run.period)[JOB]
    direct = score_features(direct_features, run.start, run.period)[JOB]
    return Paths(run, first, last, prom, raw_tx, direct_frame, direct_features, via_prom, direct)


def test_prometheus_holds_the_simulators_ticks_one_per_query_step(paths):
    """Every scorer input reaches Prometheus, the service's queries yield one row per tick, and each
    sample of a counter is exactly the series' value at its tick or up to MAX_LAG ticks before (the
    agents serve the files' numbers, and the query grid puts them on the right tick)."""
    run, raw = paths.run, paths.raw_tx
    assert sorted(paths.prom.signals) == sorted(paths.direct_features.signals)
    assert np.array_equal(paths.prom.times, paths.direct_features.times)
    name = fabric.IB_TRANSMIT_BYTES.name
    series = run.frame[run.frame["metric"] == name]
    rails = {(labels["node"], labels["device"]): s for s, labels in enumerate(raw.labels)}
    direct = paths.direct_frame
    assert set(rails) == set(direct[direct["metric"] == name].groupby(["node", "device"], observed=True).groups)
    lags = []
    for (node, device), s in rails.items():
        live_values, live_ticks = raw.values[raw.series == s], paths.first + raw.rows[raw.series == s]
        assert len(live_values) == paths.last - paths.first + 1, f"{node} {device}: a sample per tick"
        own = series[(series["node"] == node) & (series["device"] == device)].sort_values("timestamp")
        values, times = own["value"].to_numpy(), own["timestamp"].to_numpy()
        at = np.searchsorted(values, live_values, side="right") - 1
        assert (at >= 0).all() and (values[at] == live_values).all(), \
            f"{node} {device}: Prometheus holds values the series never had"
        lags += list(live_ticks - np.rint((times[at] - run.start) / run.period).astype(int))
    assert set(lags) <= set(range(MIN_LAG, MAX_LAG + 1)), f"sample lags (ticks): {sorted(set(lags))}"


def _flagged(result: JobResult) -> set[tuple[str, str]]:
    return {(d["node"], d["gpu"]) for d in result.detections}


def test_both_paths_flag_the_throttled_gpu_and_only_it(paths):
    (truth,) = paths.run.truth["stragglers"]
    throttled = (truth["node"], truth["gpu"])
    assert _flagged(paths.direct) == {throttled}, paths.direct.detections
    assert _flagged(paths.via_prom) == {throttled}, paths.via_prom.detections
    # ...and still flagged at the end: the throttle lasts to the end of the run.
    for result in (paths.direct, paths.via_prom):
        assert result.stragglers.flagged[-1, _column(result, throttled)]


def _column(result: JobResult, where: tuple[str, str]) -> int:
    return list(result.columns).index((JOB, *where))


def test_the_straggler_scores_agree(paths):
    """Over the ticks both paths flag it, the throttled GPU's score (the share of each step the job
    waits for it) agrees within SCORE_TOLERANCE, and so does the reported worst performance."""
    (truth,) = paths.run.truth["stragglers"]
    where = (truth["node"], truth["gpu"])
    prom = paths.via_prom.stragglers
    direct = paths.direct.stragglers
    p, d = _column(paths.via_prom, where), _column(paths.direct, where)
    both = prom.flagged[:, p] & direct.flagged[:, d]
    assert both.sum() >= 5, "too few ticks flagged by both paths to compare"
    prom_score, direct_score = np.median(prom.scores[both, p]), np.median(direct.scores[both, d])
    # The scenario's clock factor is 0.7: the SM clock runs 0.3 below the best ranks'.
    assert 0.2 < direct_score < 0.4
    assert abs(prom_score - direct_score) <= SCORE_TOLERANCE, (prom_score, direct_score)
    (prom_hit,), (direct_hit,) = paths.via_prom.detections, paths.direct.detections
    assert abs(prom_hit["score"] - direct_hit["score"]) <= SCORE_TOLERANCE, (prom_hit, direct_hit)


def test_both_paths_detect_the_straggler_within_the_scrape_lag(paths):
    """Detected in both, after the throttle shows (from the sample at its start + one period), the
    Prometheus path at most MAX_LAG ticks from the direct one: the first flag follows the first
    throttled sample of the GPU's own node, which the scrape can delay by that much."""
    (truth,) = paths.run.truth["stragglers"]
    period = paths.run.period
    (prom_hit,), (direct_hit,) = paths.via_prom.detections, paths.direct.detections
    assert direct_hit["first_detected_s"] >= truth["start_s"] + period
    assert prom_hit["first_detected_s"] >= truth["start_s"] + (1 + MIN_LAG) * period   # a sample read early
    assert abs(prom_hit["first_detected_s"] - direct_hit["first_detected_s"]) <= MAX_LAG * period, \
        (prom_hit, direct_hit)
