"""``lockstep sim series``: the long frame (catalog names, read back from Parquet) and ground truth."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lockstep.cli import main
from lockstep.exporters.catalog import CATALOG, analytics, gpu, storage
from lockstep.simulator.scenario import load_scenario
from tests.helpers.sim_scenarios import SHIPPED as SCENARIOS
from tests.helpers.sim_scenarios import exact_file


def series(tmp_path: Path, name: str, out: str = "s.parquet", noisy: bool = False) -> tuple[pd.DataFrame, dict]:
    """The series and truth of a shipped scenario, its exact copy unless ``noisy``."""
    target = tmp_path / out
    source = SCENARIOS / f"{name}.yaml" if noisy else exact_file(name, tmp_path)
    assert main(["sim", "series", str(source), "--out", str(target)]) == 0
    truth = json.loads(target.with_name(target.name.replace(".parquet", ".truth.json")).read_text())
    return pd.read_parquet(target), truth


# The contract example is a whole 30-minute scenario of 2.6 million rows (seconds to simulate): the tests
# that read it are slow; the fast loop keeps the shorter shipped scenarios below, series and truth alike.
@pytest.fixture(scope="module")
def contract(tmp_path_factory) -> tuple[pd.DataFrame, dict]:
    return series(tmp_path_factory.mktemp("contract"), "thermal-straggler")


@pytest.mark.slow
def test_same_seed_gives_identical_outputs(tmp_path: Path) -> None:
    """With its realistic noise too: the noise is seeded."""
    a, ta = series(tmp_path, "pause-storm", "a.parquet", noisy=True)
    b, tb = series(tmp_path, "pause-storm", "b.parquet", noisy=True)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert a.equals(b) and ta == tb
    reseeded = tmp_path / "reseeded.yaml"
    reseeded.write_text((SCENARIOS / "pause-storm.yaml").read_text().replace("seed: 11", "seed: 12"))
    assert main(["sim", "series", str(reseeded), "--out", str(tmp_path / "c.parquet")]) == 0
    c = pd.read_parquet(tmp_path / "c.parquet")
    # another seed: other values, and other scrapes missed (the row count moves a little)
    assert abs(len(c) - len(a)) < 0.01 * len(a) and not (len(c) == len(a) and c["value"].equals(a["value"]))


@pytest.mark.slow
def test_frame_is_long_format_with_catalog_names(contract) -> None:
    frame, truth = contract
    assert list(frame.columns[:3]) == ["timestamp", "metric", "node"] and frame.columns[-1] == "value"
    assert set(frame["metric"].unique()) <= set(CATALOG)
    assert frame["timestamp"].min() == truth["start_timestamp"] == 1767225600.0  # 2026-01-01T00:00:00Z
    assert frame["timestamp"].nunique() == 1800 / 5 + 1
    # the series presents the job the Slurm way: the Kubernetes labels of the mapping are empty there
    slurm_empty = {("lockstep_gpu_job_info", label) for label in ("rank", "pod", "namespace", "container")}
    # ...and NCCL Inspector's series are NCCL 2.30's: the labels only 2.29 writes are empty
    slurm_empty |= {("lockstep_nccl_inspector_collective_exec_time_seconds", label) for label in ("comm_id", "rank")}
    slurm_empty |= {(m, "pod_uid") for m in ("lockstep_job_io_read_bytes_total", "lockstep_job_io_write_bytes_total",
                                             "lockstep_job_io_pressure_stalled_seconds_total")}
    for metric in CATALOG.values():
        rows = frame[frame.metric == metric.name]
        if len(rows):  # each row carries exactly its metric's labels
            for label in metric.labels:
                if label != "node" and (metric.name, label) not in slurm_empty:
                    assert (rows[label] != "").all(), (metric.name, label)


@pytest.mark.slow
def test_counters_in_the_frame_never_decrease(contract) -> None:
    frame, _ = contract
    counters = frame[frame.metric.map(lambda m: CATALOG[m].type == "counter")]
    key = [c for c in frame.columns if c not in ("timestamp", "value")]
    diffs = counters.sort_values("timestamp").groupby(key, observed=True)["value"].diff().dropna()
    assert len(diffs) > 10_000 and (diffs >= 0).all()


@pytest.mark.slow
def test_straggler_slows_every_rank_and_lost_gpu_disappears(contract) -> None:
    frame, _ = contract
    start = frame.timestamp.min()
    util = frame[(frame.metric == gpu.SM_CLOCK.name) & (frame.node == "node05") & (frame.gpu == "3")]
    clock = util.set_index("timestamp")["value"]
    assert clock[start + 600] <= 0.7 * 1980e6 < clock[start + 200]
    lost = frame[(frame.node == "node11") & (frame.gpu == "6")]
    after = lost[lost.timestamp > start + 1650]
    # only "up" (0), the XID count that announced the loss and the GPU's identity (the agent keeps serving
    # lockstep_gpu_info for a lost GPU: exporters/gpu/samples.py identity_samples) remain
    assert set(after.metric) == {gpu.UP.name, gpu.XID_ERRORS.name, gpu.INFO.name}
    assert (after[after.metric == gpu.UP.name].value == 0).all()
    xid = frame[frame.metric == gpu.XID_ERRORS.name]
    assert set(zip(xid.node, xid.gpu, xid.xid)) == {("node11", "6", "79")} and xid.timestamp.min() == start + 1650


@pytest.mark.slow
def test_truth_of_the_contract_example(contract) -> None:
    _, truth = contract
    assert truth["stragglers"] == [
        {"job_id": "4242", "node": "node05", "gpu": "3", "kind": "gpu_throttle", "start_s": 300.0, "end_s": 900.0,
         "cause": "hardware", "required": True},
        {"job_id": "4242", "node": "node09", "gpu": None, "kind": "slow_node", "start_s": 1000.0, "end_s": 1300.0,
         "cause": "transient", "required": True}]
    stalls = {(s["start_s"], s["end_s"], s["cause"]) for s in truth["stalls"]}
    assert {(600.0, 645.0, "checkpoint"), (1200.0, 1245.0, "checkpoint"), (1400.0, 1500.0, "storage"),
            (1600.0, 1700.0, "hang")} <= stalls
    assert (1245.0, 1260.0, "network") in stalls  # the storm's part not inside the checkpoint
    assert sum(1 for s in truth["stalls"] if s["cause"] == "network" and 500 <= s["start_s"] < 520) == 3
    loss = truth["loss"]
    assert loss["allocated_gpu_seconds"] == 16 * 8 * 1800
    lost = loss["lost_gpu_seconds"]
    assert set(lost) == {"checkpoint", "straggler", "network", "storage", "hang", "throttle", "member_lost",
                         "rank_stopped", "rank_dead"}
    assert lost["hang"] == 128 * 100 and lost["checkpoint"] == 128 * 45 * 2
    # one GPU at 0.7x for 600 s: its own extra compute is throttle, its 127 peers' wait is straggler
    assert 0 < lost["throttle"] < lost["straggler"] / 50
    productive = truth["steps"] * 1.5 * 128
    assert abs(sum(lost.values()) + productive - loss["allocated_gpu_seconds"]) < 1.0


@pytest.mark.slow
def test_rank_step_seconds_show_the_straggler(contract) -> None:
    frame, _ = contract
    start = frame.timestamp.min()
    ranks = frame[(frame.metric == analytics.RANK_STEP_SECONDS.name) & (frame.timestamp == start + 600)]
    slow = ranks[(ranks.node == "node05") & (ranks.gpu == "3")]["value"].item()
    others = ranks[~((ranks.node == "node05") & (ranks.gpu == "3"))]["value"]
    assert slow > 1.2 * others.max() and others.nunique() == 1


def test_loss_of_a_fault_free_run_is_zero(tmp_path: Path) -> None:
    _, truth = series(tmp_path, "baseline")
    assert truth["stalls"] == [] and truth["stragglers"] == []
    assert all(v == 0 for v in truth["loss"]["lost_gpu_seconds"].values())
    assert truth["steps"] == pytest.approx(300 / 1.5)
    assert load_scenario(SCENARIOS / "baseline.yaml").job.checkpoint is None


def test_storage_starvation_caps_reads_and_idles_the_gpus(tmp_path: Path) -> None:
    frame, truth = series(tmp_path, "storage-starvation")
    start = frame.timestamp.min()
    reads = frame[(frame.metric == storage.READ_BYTES.name) & (frame.fstype == "lustre")]
    total = reads.groupby("timestamp")["value"].sum().diff()

    def rate(lo: float, hi: float) -> pd.Series:
        return total[(total.index > start + lo) & (total.index <= start + hi)] / 5.0

    assert (rate(105, 200) <= 2.0e8).all() and (rate(105, 200) > 0.95 * 2.0e8).all()
    assert (rate(20, 100) > 3 * 2.0e8).all()  # 1e9 bytes per 1.5 s step
    util = frame[frame.metric == gpu.UTILIZATION.name].groupby("timestamp")["value"].mean()
    assert util[start + 150] < 0.5 < 0.95 < util[start + 50]
    assert [(s["start_s"], s["end_s"], s["cause"]) for s in truth["stalls"]] == [(100.0, 200.0, "storage")]
    lost = truth["loss"]["lost_gpu_seconds"]
    assert lost["storage"] > 0 and sum(v for k, v in lost.items() if k != "storage") == 0


@pytest.mark.parametrize("name,causes,exact,stalls", [
    # exact losses follow from the scenario alone: 4 nodes x 8 GPUs = 32 job GPUs
    ("gpu-throttle-thermal", {"straggler", "throttle"}, {}, []),
    ("slow-node", {"straggler"}, {}, []),
    ("pause-storm", {"network"}, {}, [(100.0, 160.0, "network")]),
    ("link-flap", {"network"}, {}, "3 network"),
    ("hang", {"hang"}, {"hang": 32 * 100}, [(100.0, 200.0, "hang")]),
    ("checkpoint", {"checkpoint"}, {"checkpoint": 32 * 30 * 2}, [(100.0, 130.0, "checkpoint"), (200.0, 230.0, "checkpoint")]),
    ("xid", {"hang"}, {"hang": 32 * 150}, [(150.0, 300.0, "hang")]),
])
def test_each_fault_loses_time_to_its_own_cause(tmp_path: Path, name, causes, exact, stalls) -> None:
    _, truth = series(tmp_path, name)
    lost = truth["loss"]["lost_gpu_seconds"]
    assert {c for c, v in lost.items() if v > 0} == causes
    assert {c: lost[c] for c in exact} == pytest.approx(exact)
    got = [(s["start_s"], s["end_s"], s["cause"]) for s in truth["stalls"]]
    if stalls == "3 network":
        assert [c for _, _, c in got] == ["network"] * 3 and all(100 <= a < b <= 130 for a, b, _ in got)
    else:
        assert got == stalls
    if name == "slow-node":
        assert truth["stragglers"] == [{"job_id": "5001", "node": "node03", "gpu": None, "kind": "slow_node",
                                        "start_s": 100.0, "end_s": 200.0, "cause": "transient", "required": True}]
