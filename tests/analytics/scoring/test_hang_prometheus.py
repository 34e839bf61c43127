"""NCCL's RAS inputs against a REAL Prometheus filled from the simulator (promtool backfill): the joins the
emulation follows (a missing rank named by its own node; ranks of the job's largest communicator) answer there
as computed from the frame, bit for bit, and the hung ranks are named alike."""
from __future__ import annotations

import aiohttp
import numpy as np
import pytest
import yaml

from lockstep import localcluster
from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.frame.inputs import RAS_INPUTS
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.service.fetch import fetch_window
from lockstep.analytics.service.source import PrometheusSource
from lockstep.stack import Stack, start_prometheus

pytestmark = pytest.mark.integration
JOB = "6200"
SCENARIO = {"name": "hang-parity", "seed": 4, "duration_s": 600, "sample_period_s": 15, "noise": "none",
            "cluster": {"nodes": 4, "gpus_per_node": 4, "nodes_per_rack": 4},
            "job": {"job_id": JOB, "nodes": 3, "step_time_s": 1.5},
            "faults": [{"kind": "rank_stopped", "node": "node00", "gpu": 1, "start_s": 100, "end_s": 250},
                       {"kind": "rank_died", "node": "node02", "gpu": 3, "start_s": 300, "end_s": 500}]}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("scenario") / "hang-parity.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return simulate(path)


@pytest.fixture(scope="module")
def prometheus(run, tmp_path_factory):
    frame = run.frame
    workdir = tmp_path_factory.mktemp("prom")
    localcluster.backfill(frame.astype({c: str for c in frame.columns if c not in ("timestamp", "value")}), workdir,
                          max_block_duration="24h")
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, workdir))


async def test_ras_inputs_from_prometheus_equal_the_emulated_ones_and_name_the_same_ranks(prometheus, run):
    window = source_prom.Window(run.start, run.start + run.truth["duration_s"], run.period)
    async with aiohttp.ClientSession() as session:
        held = await fetch_window(PrometheusSource(session, prometheus.url, 10.0), JOB, window)
    via_prom, direct = held.features(), build_features(run.frame)
    # The dead rank's series end while its process is gone, and the missing-rank ones when it is back: blocks
    # backfilled hold no staleness markers, so Prometheus answers them for 5 minutes more (its lookback) where a
    # live one, which marks a vanished series stale, answers nothing, as the emulation does. Elsewhere: equal.
    rel = direct.times - run.start
    dead = [j for j, (_, node, gpu) in enumerate(direct.columns) if (node, gpu) == ("node02", "3")]
    vanished = np.zeros(direct.signals["behind"].shape, bool)
    vanished[(rel >= 300) & (rel < 300 + 300) | (rel >= 500), dead[0]] = True
    for name in [i.name for i in RAS_INPUTS if i.name != "rank"]:
        assert name in direct.signals, name
        a, b = via_prom.signals[name], direct.signals[name]
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        assert (same | vanished).all(), (name, np.argwhere(~same & ~vanished)[:5])
        assert (np.isnan(b) | same).all(), name                  # what the emulation answers, Prometheus does
    assert np.isfinite(direct.signals["missing"]).any()          # the dead rank, named by its own node
    assert via_prom.ranks == direct.ranks and direct.ranks[:5] == ("0", "1", "2", "3", "4")
    a = score_features(via_prom, run.start, run.period)[JOB]
    b = score_features(direct, run.start, run.period)[JOB]
    assert list(a.causes) == list(b.causes) and (a.culprits == b.culprits).all() and a.hangs == b.hangs
    assert [(h["node"], h["gpu"], h["rank"], h["cause"]) for h in a.hangs] == [
        ("node00", "1", "1", "rank_stopped"), ("node02", "3", "11", "rank_dead")]


async def test_a_post_mortem_reads_ras_for_the_hangs_and_names_the_same_ranks(prometheus, run, monkeypatch):
    """The post-mortem scores the window without NCCL's RAS inputs first; its stalls read as hangs, so it reads
    them and scores again: the ranks named are those of the whole direct scoring."""
    from lockstep.analytics.evaluation import postmortem

    asked = []
    series = PrometheusSource.series

    async def named(self, inp, job_id, window, nodes):
        asked.append(inp.name)
        return await series(self, inp, job_id, window, nodes)

    monkeypatch.setattr(PrometheusSource, "series", named)
    got = await postmortem.post_mortem(postmortem.PostMortem(prometheus.url, run.start,
                                                             run.start + run.truth["duration_s"], run.period))
    direct = score_features(build_features(run.frame), run.start, run.period)[JOB]
    assert [(h["node"], h["gpu"], h["rank"], h["cause"]) for h in got["hangs"]] == \
        [(h["node"], h["gpu"], h["rank"], h["cause"]) for h in direct.hangs] == \
        [("node00", "1", "1", "rank_stopped"), ("node02", "3", "11", "rank_dead")]
    ras = {i.name for i in RAS_INPUTS}
    first = next(k for k, name in enumerate(asked) if name in ras)
    assert "sm" in asked[:first] and ras <= set(asked[first:])    # after the first pass, and all of them


def test_the_queries_name_their_inputs_metrics():
    """Each RAS query reads only catalog metrics (a typo would answer nothing, silently)."""
    from lockstep.exporters.catalog import CATALOG
    for inp in RAS_INPUTS:
        text = inp.promql(JOB, 15.0, ("node00",))
        assert all(m in CATALOG for m in inp.metrics) and all(m in text for m in inp.metrics), text

