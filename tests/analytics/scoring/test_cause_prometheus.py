"""The post-mortem command and the service give the same causes on the same window, through a REAL
Prometheus filled with a simulated run (promtool backfill).

tests/fixtures/analytics/causes-live.yaml: a heavier pipeline stage (imbalance, cause work), a GPU broken
before the job started (a hardware straggler) and the job's input slowing it (a job-wide slowdown,
cause storage). Each finding's cause is read off the scenario file; the post-mortem's report and the
service's view of the same window must carry those causes, the same in both.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import aiohttp
import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.evaluation.evaluate import evaluate
from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.refresh import Refresher
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.toolkit.configfile import load_yaml
from lockstep.stack import Stack, start_prometheus
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration
SCENARIO = FIXTURES / "analytics/causes-live.yaml"
SPEC = load_yaml(SCENARIO)
BROKEN = next((f["node"], str(f["gpu"])) for f in SPEC["faults"] if f["kind"] == "gpu_defect")
SLOWED = next(f for f in SPEC["faults"] if f["kind"] == "storage_starvation")


@pytest.fixture(scope="module")
def direct():
    return evaluate(SCENARIO)


@pytest.fixture(scope="module")
def prometheus(direct, tmp_path_factory):
    run = direct[0]
    frame = run.frame[run.frame["metric"].isin(INPUT_METRICS)]
    frame = frame.astype({c: str for c in frame.columns if c not in ("timestamp", "value")})
    workdir = tmp_path_factory.mktemp("prom")
    localcluster.backfill(pd.DataFrame(frame), workdir, max_block_duration="24h")
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, workdir))


@dataclass(frozen=True)
class Settings:
    window_s: float
    step_s: float = 5.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1


@dataclass(frozen=True)
class OneJob:
    source: PrometheusSource
    job_id: str

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return [self.job_id]

    async def series(self, inp, job_id, window, nodes):
        return await self.source.series(inp, job_id, window, nodes)

    async def resume(self, job_ids, at):
        return {}


def _post_mortem(url: str, start: float, end: float) -> dict:
    out = subprocess.run([sys.executable, "-m", "lockstep", "analytics", "evaluate", "--prometheus-url", url,
                          "--from", str(start), "--to", str(end), "--job", SPEC["job"]["job_id"], "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def _served(url: str, start: float, end: float):
    """The service's view of the window [start, end]: one refresh at its end with a window that long."""
    async with aiohttp.ClientSession() as session:
        refresher = Refresher(OneJob(PrometheusSource(session, url, 60.0), SPEC["job"]["job_id"]),
                              Settings(end - start + 5.0))
        await refresher.refresh(end)
        return refresher.state.results.jobs[SPEC["job"]["job_id"]]


def _causes(rep: dict) -> dict:
    return {"stragglers": sorted((d["node"], d["gpu"], d["cause"]) for d in rep["stragglers"]),
            "imbalance": sorted((r["node"], r["gpu"], r["cause"]) for f in rep["imbalance"] for r in f["ranks"]),
            "stalls": sorted((s["start_s"], s["cause"]) for s in rep["stalls"]),
            "slowdowns": sorted(d["cause"] for d in rep["slowdowns"])}


async def test_the_post_mortem_and_the_service_give_the_same_causes_on_the_same_window(prometheus, direct):
    """A service's 15-minute window, over the input's slowdown and the five minutes before it (the job's
    own baseline): the broken GPU a hardware straggler, the heavier stage imbalance with cause work, the
    job slowed by storage, in both."""
    run = direct[0]
    start, end = run.start + 290.0, run.start + 1190.0
    rep = _post_mortem(prometheus.url, start, end)
    view = await _served(prometheus.url, start, end)
    assert [(g.node, g.gpu, g.cause) for g in view.stragglers] == [(*BROKEN, "hardware")]
    assert {(d["node"], d["gpu"]): d["cause"] for d in rep["stragglers"]} == {BROKEN: "hardware"}
    served_ranks = sorted((r.node, r.gpu, r.cause) for r in view.imbalance.ranks)
    assert served_ranks == _causes(rep)["imbalance"] and {c for _, _, c in served_ranks} == {"work"}
    assert view.imbalance.cause == "work"
    (slowed,) = rep["slowdowns"]
    assert slowed["cause"] == "storage" and abs(slowed["start_s"] + 290.0 - SLOWED["start_s"]) <= 30.0
    # the service is in the slowdown at 990 s of the run, by the same cause (a refresh there)
    inside = await _served(prometheus.url, start, run.start + 990.0)
    assert inside.slowdown.slowed and inside.slowdown.cause == slowed["cause"]


async def test_the_post_mortem_of_the_whole_run_is_what_the_direct_path_reports(prometheus, direct):
    run, _, rep = direct
    got = _post_mortem(prometheus.url, run.start, run.start + SPEC["duration_s"])
    assert _causes(got) == _causes(json.loads(json.dumps(rep)))
    # the ledger too, within what a missed scrape moves: Prometheus fills one with the sample before it (its
    # lookback: a checkpoint's write rate lasts a sample longer), the emulation leaves it absent
    # (analytics/evaluation/emulate.py)
    near = 0.005 * rep["ledger"]["allocated_gpu_seconds"]
    for kind, by_cause in rep["ledger"]["gpu_seconds"].items():
        assert got["ledger"]["gpu_seconds"][kind] == pytest.approx(by_cause, abs=near), kind
    total = sum(v for by_cause in got["ledger"]["gpu_seconds"].values() for v in by_cause.values())
    assert total == pytest.approx(got["ledger"]["allocated_gpu_seconds"], rel=1e-12)


def _cells(block) -> dict:
    """{(node, gpu, row): value} of an answer."""
    return {(block.labels[s]["node"], block.labels[s]["gpu"], int(r)): float(v)
            for s, r, v in zip(block.series, block.rows, block.values)}


async def test_prometheus_answers_the_collective_input_as_the_evaluation_emulates_it(prometheus, direct):
    """NCCL Inspector's all-reduce time (the straggler scorer's collective view): the live query on the real
    Prometheus returns, per job GPU and step, the number the evaluation's emulation computes from the frame."""
    from lockstep.analytics.evaluation.emulate import by_metric, frame_block
    from lockstep.analytics.frame.inputs import INPUTS
    from lockstep.analytics.prom.grid import Window
    (inp,) = [i for i in INPUTS if i.name == "collective"]
    run = direct[0]
    window = Window(run.start + 300.0, run.start + 600.0, 5.0)
    job_id = SPEC["job"]["job_id"]
    async with aiohttp.ClientSession() as session:
        served = _cells(await PrometheusSource(session, prometheus.url, 60.0).series(inp, job_id, window))
    emulated = _cells(frame_block(by_metric(run.frame[run.frame["metric"].isin(inp.metrics)]), inp, window, job_id))
    gpus = SPEC["job"]["nodes"] * SPEC["cluster"]["gpus_per_node"]
    assert len({(n, g) for n, g, _ in emulated}) == gpus and len(emulated) == gpus * window.rows
    assert served.keys() == emulated.keys()
    assert all(served[k] == pytest.approx(emulated[k], rel=1e-9) for k in emulated)
