"""Rank hangs in the simulator: the fault kinds, their truth, and the job's collectives as each node's RAS answer
shows them in the series frame and in a live run (a RAS service per node, found through --sim.node-root)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.exporters.catalog import nccl as m
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.simulator import hardware as hw
from lockstep.simulator.scenario import parse_scenario
from lockstep.simulator.series import series_frame, tables
from lockstep.simulator.truth import Truth
from lockstep.stack import Stack, http_get

BASE = {"name": "ranks", "seed": 5, "duration_s": 600, "sample_period_s": 15,
        "cluster": {"nodes": 3, "gpus_per_node": 4, "nodes_per_rack": 3},
        "job": {"job_id": "77", "nodes": 3, "step_time_s": 1.5, "checkpoint": {"every_s": 200, "blocking_s": 30}}}


def scenario(*faults: dict, **top):
    return parse_scenario({**BASE, **top, "faults": list(faults)}, "ranks.yaml")


def frame(sc) -> pd.DataFrame:
    f = series_frame(sc)
    return f.assign(t=f["timestamp"] - sc.start_timestamp)


def per_rank(f: pd.DataFrame, metric: str, comm_size: int) -> pd.DataFrame:
    """t × (node, gpu) of ``metric`` in the communicator of ``comm_size`` ranks."""
    sizes = f[f["metric"] == m.COMMUNICATOR_RANKS.name]
    comms = set(sizes[sizes["value"] == comm_size]["comm"].astype(str))
    rows = f[(f["metric"] == metric) & f["comm"].astype(str).isin(comms)]
    return rows.groupby(["t", "node", "gpu"], observed=True)["value"].sum().unstack(["node", "gpu"])


@pytest.mark.parametrize("fault,problem", [
    ({"kind": "rank_stopped", "node": "node01", "start_s": 10, "end_s": 20}, "gpu"),
    ({"kind": "rank_died", "node": "node09", "gpu": 0, "start_s": 10, "end_s": 20}, "does not exist"),
    ({"kind": "peer_dead", "node": "node01", "gpu": 4, "start_s": 10, "end_s": 20}, "must be 0..3"),
])
def test_a_bad_rank_hang_names_its_field(fault, problem):
    with pytest.raises(ConfigError, match=problem):
        scenario(fault)


def test_the_truth_names_each_hung_rank_with_its_cause():
    sc = scenario({"kind": "rank_stopped", "node": "node01", "gpu": 2, "start_s": 250, "end_s": 400},
                  {"kind": "rank_died", "node": "node02", "gpu": 0, "start_s": 450, "end_s": 550})
    truth = Truth(sc)
    list(tables(sc, truth))
    doc = truth.document()
    assert [(h["kind"], h["cause"], h["node"], h["gpu"], h["rank"]) for h in doc["hangs"]] == [
        ("rank_stopped", "rank_stopped", "node01", "2", 6), ("rank_died", "rank_dead", "node02", "0", 8)]
    assert [(s["cause"], s["start_s"], s["end_s"]) for s in doc["stalls"] if s["cause"].startswith("rank")] == [
        ("rank_stopped", 250.0, 400.0), ("rank_dead", 450.0, 550.0)]


def test_the_loss_of_a_hung_rank_is_its_cause_and_its_gpu_idles():
    sc = scenario({"kind": "rank_stopped", "node": "node01", "gpu": 2, "start_s": 255, "end_s": 390}, noise="none")
    truth = Truth(sc)
    f = pa.concat_tables(list(tables(sc, truth))).to_pandas()
    f = f.assign(t=f["timestamp"] - sc.start_timestamp)
    lost = truth.document()["loss"]["lost_gpu_seconds"]
    assert lost["rank_stopped"] == pytest.approx(12 * 135, rel=0.01) and lost["hang"] == 0
    sm = f[(f["metric"] == "lockstep_gpu_sm_active_ratio") & (f["t"] == 300)].set_index(["node", "gpu"])["value"]
    assert sm[("node01", "2")] == 0 and (sm.drop(("node01", "2")) > 0).all()   # the others spin in NCCL


def test_a_stopped_rank_is_behind_its_communicators_in_every_answer_taken_during_the_hang():
    sc = scenario({"kind": "rank_stopped", "node": "node01", "gpu": 2, "start_s": 250, "end_s": 400})
    f = frame(sc)
    behind = per_rank(f, m.RANK_BEHIND.name, 12)
    age = f[f["metric"] == m.RAS_ANSWER_AGE.name].pivot_table(index="t", columns="node", values="value",
                                                                observed=True)
    taken = age.index.to_numpy()[:, None] - age.to_numpy()          # when each node's answer was taken
    during = pd.DataFrame((taken > 250) & (taken < 400), index=age.index, columns=age.columns)
    culprit = ("node01", "2")
    in_hang = during["node01"]
    assert (behind.loc[in_hang[in_hang].index, culprit] == 4).all()         # one all-reduce step: 4 of them
    others = behind.drop(columns=[culprit])
    for node in ("node00", "node01", "node02"):
        rows = during[node][during[node]].index
        assert (others.loc[rows, [c for c in others.columns if c[0] == node]] == 0).all().all()
    # answers taken while the job runs find ranks at most a step apart; answers in a checkpoint, level
    assert behind.max().max() == 4
    counts = per_rank(f, m.RANK_COLLECTIVES.name, 12)
    frozen = counts.loc[(counts.index > 300) & (counts.index < 390)]
    assert (frozen.diff().dropna() == 0).all().all()                        # nobody moves while it hangs


def test_a_dead_rank_is_missing_unresponsive_then_dead_and_named_by_every_node():
    sc = scenario({"kind": "rank_died", "node": "node02", "gpu": 1, "start_s": 255, "end_s": 500}, noise="none")
    f = frame(sc)
    info = f[f["metric"] == m.MISSING_RANK_INFO.name]
    assert set(info["address"].astype(str)) == {"10.10.0.3"} and set(info["gpu"].astype(str)) == {"1"}
    reasons = info.groupby("t", observed=True)["reason"].agg(lambda r: set(r.astype(str)))
    # polled every 15 s (phase 0 without noise): the answer at t was taken at t
    assert reasons.loc[270] == {"unresponsive"} and reasons.loc[255 + hw.RAS_PEER_DEAD_TIMEOUT_S + 15] == {"dead"}
    assert set(info[info["t"] == 300]["node"].astype(str)) == {"node00", "node01", "node02"}
    counts = f[(f["metric"] == m.RANK_COLLECTIVES.name) & (f["t"] == 300)]
    assert not len(counts[(counts["node"] == "node02") & (counts["gpu"] == "1")])   # no counts: absent


def test_a_lost_members_node_answers_nothing_and_the_others_name_its_ranks():
    sc = scenario({"kind": "member_lost", "node": "node00", "start_s": 255, "end_s": 500}, noise="none")
    f = frame(sc)
    at = f[f["t"] == 300]
    assert set(at[at["metric"] == m.RAS_NODE_ADDRESS.name]["node"].astype(str)) == {"node01", "node02"}
    named = at[at["metric"] == m.MISSING_RANK_INFO.name]
    assert set(named["gpu"].astype(str)) == {"0", "1", "2", "3"} and set(named["address"].astype(str)) == {"10.10.0.1"}


@pytest.mark.integration
def test_the_live_run_serves_each_nodes_ras_where_sim_node_root_finds_it(tmp_path: Path):
    path = tmp_path / "ranks.yaml"
    path.write_text(yaml.safe_dump({**BASE, "duration_s": 3600, "sample_period_s": 1,
                                    "faults": [{"kind": "rank_stopped", "node": "node01", "gpu": 2, "start_s": 4,
                                                "end_s": 3600}]}))
    with Stack() as st:
        lc.start_sim(path, tmp_path / "sim", st)
        address = (tmp_path / "sim/node01/nccl-ras.address").read_text().strip()
        assert address.startswith("127.0.0.1:")
        agent = lc.start_node_agents(tmp_path / "sim", st, nodes=["node01"],
                                     extra_args=["--collector.nccl-ras", "--nccl-ras.poll-interval=0.5"])["node01"]
        deadline = time.monotonic() + 60
        while True:
            text = http_get(agent.url + "/metrics")[1].decode()
            behind = [line for line in text.splitlines() if line.startswith(m.RANK_BEHIND.name)
                      and 'gpu="2"' in line and not line.endswith(" 0")]
            if behind or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert behind, text[-3000:]
    assert f'{m.RAS_NODE_ADDRESS.name}{{address="10.10.0.2"}} 1' in text
    assert 'job_id="77"' in behind[0]
    assert np.isfinite(float(behind[0].rsplit(" ", 1)[1]))
