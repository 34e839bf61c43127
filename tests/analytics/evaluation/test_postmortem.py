"""Post-mortems and held windows against a REAL Prometheus filled with a simulated hour (promtool backfill).

tests/fixtures/analytics/postmortem.yaml: job 7400 on 4 nodes x 4 GPUs for an hour with realistic noise,
a throttled GPU, a slow node, a pause storm, checkpoints. Beside it, job 7401: the same hour on other
nodes, whose GPUs change: node13 leaves the job at 1500 s, node14 joins it at 1650 s.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import aiohttp
import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.evaluation import postmortem
from lockstep.analytics.evaluation.evaluate import evaluate
from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.service import fetch
from lockstep.analytics.service.refresh import Refresher
from lockstep.analytics.service.source import PrometheusSource
from lockstep.stack import Stack, start_prometheus
from tests.helpers.analytics_service import Settings
from tests.helpers.paths import FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.long(85)]
SCENARIO = FIXTURES / "analytics/postmortem.yaml"
LEAVE_S, JOIN_S = 1500, 1650


@pytest.fixture(scope="module")
def direct():
    return evaluate(SCENARIO)


def _moved(frame: pd.DataFrame, start: float) -> pd.DataFrame:
    """Job 7401: the run again on nodes node1x, node13 leaving and node14 joining (its GPUs named as node10's)."""
    frame = frame.assign(node="node1" + frame["node"].str[-1], uuid=frame["uuid"] + "-b",
                         job_id=frame["job_id"].replace("7400", "7401"))
    info = frame["metric"] == "lockstep_gpu_job_info"
    left = info & (frame["node"] == "node13") & (frame["timestamp"] >= start + LEAVE_S)
    joined = frame[info & (frame["node"] == "node10") & (frame["timestamp"] >= start + JOIN_S)]
    return pd.concat([frame[~left], joined.assign(node="node14", uuid=joined["uuid"] + "-c")], ignore_index=True)


@pytest.fixture(scope="module")
def prometheus(direct, tmp_path_factory):
    run = direct[0]
    frame = run.frame[run.frame["metric"].isin(INPUT_METRICS)]
    frame = frame.astype({c: str for c in frame.columns if c not in ("timestamp", "value")})
    workdir = tmp_path_factory.mktemp("prom")
    localcluster.backfill(pd.concat([frame, _moved(frame, run.start)], ignore_index=True), workdir,
                          max_block_duration="24h")
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, workdir))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockstep", "analytics", "evaluate", *args], capture_output=True,
                          text=True, timeout=300)


def _findings(rep: dict) -> dict:
    """The contract's keys only: stragglers, stalls, loss and imbalance (the post-mortem adds unix times)."""
    drop = {"first_detected", "start", "end"}
    return {k: [{f: v for f, v in row.items() if f not in drop} for row in rep[k]] if isinstance(rep[k], list)
            else rep[k] for k in ("stragglers", "stalls", "loss", "imbalance")}


def test_a_post_mortem_reports_what_the_direct_path_reports(prometheus, direct):
    run, _, rep = direct
    out = _cli("--prometheus-url", prometheus.url, "--from", "2026-01-01T00:00:00Z", "--to", str(run.start + 3600),
               "--job", "7400", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["from"], got["to"], got["jobs"]) == (run.start, run.start + 3600, ["7400"])
    assert _findings(got) == _findings(json.loads(json.dumps(rep)))
    assert [(d["node"], d["gpu"]) for d in got["stragglers"]] == [("node01", "2"), ("node02", None)]
    for d in got["stragglers"]:
        assert d["first_detected"] == run.start + d["first_detected_s"]
    # each checkpoint as the direct path measures it, with the file system the truth says it wrote to
    assert [(c["start_s"], c["duration_s"], c["mount"]) for c in got["checkpoints"]] == \
        [(c["start_s"], c["duration_s"], c["mount"]) for c in rep["checkpoints"]]
    assert got["checkpoints"] and {c["mount"] for c in got["checkpoints"]} == {c["mount"] for c in run.truth["checkpoints"]}


def test_a_window_without_jobs_says_so(prometheus, direct):
    run = direct[0]
    out = _cli("--prometheus-url", prometheus.url, "--from", str(run.start - 7200), "--to", str(run.start - 3600))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("0 jobs; no jobs in the window (lockstep_gpu_job_info)")
    empty = json.loads(_cli("--prometheus-url", prometheus.url, "--from", str(run.start - 7200), "--to",
                            str(run.start - 3600), "--json").stdout)
    assert (empty["jobs"], empty["stragglers"], empty["stalls"], empty["loss"]) == ([], [], [], [])


@pytest.mark.parametrize("args, message", [
    (["--prometheus-url", "http://127.0.0.1:9", "--from", "0", "--to", "60"], "http://127.0.0.1:9/api/v1/query: "),
    (["--prometheus-url", "127.0.0.1:9090", "--from", "0", "--to", "60"], "--prometheus-url '127.0.0.1:9090': want"),
    (["--prometheus-url", "http://127.0.0.1:9", "--from", "monday", "--to", "60"], "--from 'monday': want"),
    (["--prometheus-url", "http://127.0.0.1:9", "--from", "2026-01-01T00:00:00", "--to", "60"], "needs its zone"),
    (["--prometheus-url", "http://127.0.0.1:9", "--from", "60", "--to", "0"], "must be before --to"),
])
def test_a_bad_url_or_time_is_one_line_and_exit_2(args, message):
    out = _cli(*args)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("lockstep analytics evaluate: error: ") and message in line


async def test_a_long_window_is_fetched_in_pieces_with_the_same_result(prometheus, direct, monkeypatch):
    """The hour in pieces of at most 2,000 samples per answer (about 10 minutes of a 16-GPU input):
    many more queries, the same report."""
    run = direct[0]
    pm = postmortem.PostMortem(prometheus.url, run.start, run.start + 3600, job_id="7400")
    whole = await postmortem.post_mortem(pm)
    asked = []
    series = PrometheusSource.series

    async def counted(self, inp, job_id, window, nodes):
        block = await series(self, inp, job_id, window, nodes)
        asked.append(block.samples)
        return block

    monkeypatch.setattr(PrometheusSource, "series", counted)
    monkeypatch.setattr(fetch, "SAMPLES_PER_QUERY", 2000)
    pieces = await postmortem.post_mortem(pm)
    assert max(asked) <= 2000 and len(asked) > 5 * 13
    assert pieces == whole


async def test_a_job_that_never_hung_is_scored_without_the_ras_queries(prometheus, direct, monkeypatch):
    """NCCL's RAS inputs only name the ranks a hang waits for: no stall of this hour reads as a hang, so none of
    them is asked for (tests/analytics/scoring/test_hang_prometheus.py: a run that hangs, localised)."""
    from lockstep.analytics.frame.inputs import RAS_INPUTS

    run = direct[0]
    asked = set()
    series = PrometheusSource.series

    async def named(self, inp, job_id, window, nodes):
        asked.add(inp.name)
        return await series(self, inp, job_id, window, nodes)

    monkeypatch.setattr(PrometheusSource, "series", named)
    got = await postmortem.post_mortem(postmortem.PostMortem(prometheus.url, run.start, run.start + 3600,
                                                             job_id="7400"))
    assert {"member", "sm", "clock", "pause"} <= asked and not asked & {i.name for i in RAS_INPUTS}
    assert "hang" not in {s["cause"] for s in got["stalls"]} and not got["hangs"]


@dataclasses.dataclass(frozen=True)
class OneJob:
    """The Prometheus source, listing only the job under test."""
    source: PrometheusSource
    job_id: str

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return [self.job_id]

    async def series(self, inp, job_id: str, window, nodes):
        return await self.source.series(inp, job_id, window, nodes)

    async def resume(self, job_ids: list[str], at: float) -> dict:
        return {}


async def _both(url: str, job_id: str, window_s: float, times: list[float]) -> list[tuple]:
    """At each time, a refresher holding its windows and one fetching every window whole: what each
    serves and counts, with its fetching."""
    async with aiohttp.ClientSession() as session:
        source = OneJob(PrometheusSource(session, url, 30.0), job_id)
        held, whole = Refresher(source, Settings(window_s)), Refresher(source, Settings(window_s))
        out = []
        for t in times:
            await held.refresh(t)
            whole.state.windows.clear()
            await whole.refresh(t)
            assert held.state.results.jobs[job_id] == whole.state.results.jobs[job_id], t
            assert held.state.losses == whole.state.losses and len(held.state.losses) == 1, t
            # what the scorers learn and keep between windows: the job's baseline, its GPUs' usual pace
            assert held.state.baselines == whole.state.baselines, t
            pd.testing.assert_frame_equal(held.state.learned[job_id], whole.state.learned[job_id])
            out.append((held.state.health, whole.state.health, tuple(whole.state.windows[job_id].columns)))
        return out


async def test_a_held_window_moved_on_scores_and_counts_as_a_window_fetched_whole(prometheus, direct):
    """15 min windows refreshed every 15 s across the throttled GPU's slowdown: the same views (scores,
    flags, stalls and their causes) and the same loss counters, exactly; after the first refresh only
    the new rows are fetched (with the last one again), over 10x fewer samples."""
    run = direct[0]
    times = [run.start + 1200 + 15 * k for k in range(13)]
    steps = await _both(prometheus.url, "7400", 900, times)
    assert [h.full_fetches for h, _, _ in steps] == [1] + [0] * 12
    assert all(h.fetched_samples * 10 <= w.fetched_samples for h, w, _ in steps[1:])


async def test_a_job_whose_gpus_change_is_fetched_whole_then_and_only_then(prometheus, direct):
    """Job 7401 loses node13 at 1500 s (Prometheus still shows its last sample for 5 min) and gains
    node14 at 1650 s: wherever the GPUs of the window differ from the refresh before, the held window
    is fetched whole, and it serves and counts exactly as a window fetched whole."""
    run = direct[0]
    steps = await _both(prometheus.url, "7401", 60, [run.start + 1560 + 30 * k for k in range(13)])
    gpus = [columns for _, _, columns in steps]
    changed = [1] + [int(a != b) for a, b in zip(gpus, gpus[1:])]
    assert [h.full_fetches for h, _, _ in steps] == changed
    assert sum(changed) == 3      # the first refresh, node14 joining, node13's last sample leaving the window
    assert {n for _, n, _ in gpus[0]} == {"node10", "node11", "node12", "node13"}
    assert {n for _, n, _ in gpus[-1]} == {"node10", "node11", "node12", "node14"}
