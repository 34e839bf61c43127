"""The simulated job's own pace: NCCL Inspector files as NCCL 2.30 and 2.29 write them (read back by the strict
parser), the slow rank's inversion (shortest execution time, highest bandwidth), the dump interval, a hang and a lost
GPU as NCCL shows them; the ranks' step ends through the step feed; and ``lockstep sim run`` with ``lockstep exporter
--sim.node-root`` serving both."""
from __future__ import annotations

import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from lockstep import stack as stack_mod
from lockstep.exporters.catalog import nccl_inspector as ni
from lockstep.exporters.catalog import pace, stepfeed
from lockstep.exporters.catalog.simlayout import SimCluster
from lockstep.exporters.nccl import inspector as fmt
from lockstep.simulator.inspector import InspectorWriter
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import parse_scenario
from lockstep.simulator.steps import StepSender

SCENARIO = {"name": "pace", "seed": 5, "duration_s": 300, "sample_period_s": 5,
            "cluster": {"nodes": 3, "gpus_per_node": 4, "nodes_per_rack": 3, "rack_budget_watts": 60000},
            "job": {"job_id": "4242", "nodes": 2, "step_time_s": 1.5},
            "faults": [{"kind": "gpu_throttle", "node": "node01", "gpu": 2, "start_s": 0, "end_s": 300,
                        "clock_factor": 0.7, "reason": "thermal"},
                       {"kind": "hang", "start_s": 150, "end_s": 200},
                       {"kind": "xid", "node": "node00", "gpu": 3, "at_s": 230, "code": 79}]}


@pytest.fixture
def short_root():
    root = Path(tempfile.mkdtemp(prefix="pace", dir="/tmp"))    # socket names stay under 108 bytes
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run(root: Path, version: str, until_s: float, with_sockets: bool = False):
    """The scenario's Inspector files and step reports up to ``until_s``; returns (model, writer, {node: reports})."""
    model = Model(parse_scenario(SCENARIO, "pace.yaml"), start_timestamp=1_767_225_600.0)
    nodes = [SimCluster(root).node(n) for n in model.topo.nodes]
    writer = InspectorWriter(model.topo, nodes, version, "4242")
    sender = StepSender(model.topo, nodes, "4242")
    sockets = {}
    if with_sockets:
        for node in nodes:
            node.root.mkdir(parents=True, exist_ok=True)
            sockets[node.name] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sockets[node.name].bind(str(node.steps_socket))
            sockets[node.name].setblocking(False)
    reports: dict[str, list] = {name: [] for name in sockets}
    for state in model.states(int(until_s // 5) + 1):
        writer.write(state)
        sender.send(state)
        for name, sock in sockets.items():
            while True:
                try:
                    reports[name].append(stepfeed.decode(sock.recv(4096)))
                except BlockingIOError:
                    break
    sender.close()
    for sock in sockets.values():
        sock.close()
    return model, writer, reports


def files(root: Path, node: str) -> dict[str, tuple[fmt.Bucket, ...]]:
    return {p.name: fmt.parse(p.read_bytes()) for p in sorted((root / node / "nccl-inspector").glob("*.prom"))}


def dp_allreduce(buckets, size="25-26MB") -> dict[str, float]:
    (b,) = [b for b in buckets if b.label("comm_name") == "DP" and b.label("message_size") == size]
    return dict(b.values)


def test_one_file_per_job_gpu_named_by_its_cuda_uuid_each_strict_2_30(short_root):
    model, _, _ = run(short_root, "2.30", 30)
    uuids = model.topo.identity["uuid"]
    for n, node in enumerate(("node00", "node01")):
        got = files(short_root, node)
        assert sorted(got) == sorted(f"nccl_inspector_metrics_{u.removeprefix('GPU-')}.prom"
                                     for u in uuids[n * 4:(n + 1) * 4])
        for buckets in got.values():
            assert {(b.kind, b.label("comm_name"), b.operation) for b in buckets} == {
                ("collective", "DP", "AllReduce"), ("collective", "TP", "AllGather"),
                ("collective", "TP", "ReduceScatter"), ("p2p", "PP 0-1", "Send"), ("p2p", "PP 0-1", "Recv")}
            assert {b.label("algo_proto") for b in buckets if b.kind == "collective"} == {"RING_SIMPLE"}
            assert {b.label("version") for b in buckets} == {"v5.1"}
    assert not (short_root / "node02" / "nccl-inspector").exists()      # not in the job


def test_the_slow_rank_shows_the_shortest_collectives_and_the_highest_bandwidth(short_root):
    run(short_root, "2.30", 60)
    times, bandwidths = {}, {}
    for node in ("node00", "node01"):
        for buckets in files(short_root, node).values():
            gpu = buckets[0].label("gpu")
            values = dp_allreduce(buckets)
            times[(node, gpu)] = values["nccl_collective_exec_time_microseconds"]
            bandwidths[(node, gpu)] = values["nccl_bus_bandwidth_gbs"]
    slow = ("node01", "GPU2")
    assert min(times, key=times.get) == slow and max(bandwidths, key=bandwidths.get) == slow
    peers = [t for k, t in times.items() if k != slow]
    assert min(peers) > 10 * times[slow]        # its peers wait inside the kernel for it
    assert 40 < bandwidths[slow] < 400          # its own transfer: a rail-bound ring all-reduce (GB/s)


def test_the_files_hold_the_series_frames_all_reduce_time(short_root):
    """The live file and the series frame (the evaluation's input) carry one number for the data-parallel
    all-reduce's large bucket: the dump's mean over its interval, as NCCL 2.30 averages it."""
    from lockstep.simulator.inspector import dumped_exec_s, job_comms
    model, _, _ = run(short_root, "2.30", 60)
    state = list(model.states(13))[-1]
    dp = job_comms(model.topo)[0]
    expected = dumped_exec_s(model.topo, state, dp, dp.ops[0])
    gpus = list(model.topo.job_gpus.nonzero()[0])
    for node in ("node00", "node01"):
        for buckets in files(short_root, node).values():
            g = model.topo.flat(node, int(buckets[0].label("gpu").removeprefix("GPU")))
            written = dp_allreduce(buckets)["nccl_collective_exec_time_microseconds"]
            assert written == pytest.approx(expected[gpus.index(g)] * 1e6, rel=1e-5)


def test_files_are_rewritten_at_the_dump_interval_only(short_root):
    model = Model(parse_scenario(SCENARIO, "pace.yaml"))
    nodes = [SimCluster(short_root).node(n) for n in model.topo.nodes]
    writer = InspectorWriter(model.topo, nodes, "2.30", "4242")
    path = writer.path(0)
    seen = []
    for state in model.states(14):
        writer.write(state)
        seen.append((state.t, path.stat().st_mtime_ns if path.exists() else None))
    mtimes = dict(seen)
    assert all(mtimes[t] is None for t in (0, 5, 25))
    assert mtimes[30] == mtimes[55] != mtimes[60] == mtimes[65]


def test_a_hang_lets_2_30_files_age_and_empties_2_29_files(short_root):
    for version in ("2.30", "2.29"):
        root = short_root / version
        _, writer, _ = run(root, version, 180)          # the hang runs from 150 s to 200 s: the dump at 180 s
        path = writer.path(5)
        if version == "2.30":
            assert fmt.parse(path.read_bytes())          # the 150 s dump's, left as it was
        else:
            assert path.read_bytes() == b""


def test_a_lost_gpus_process_leaves_its_file_behind(short_root):
    _, writer, _ = run(short_root, "2.30", 270)
    lost, peer = writer.path(3), writer.path(2)         # node00 GPU 3: XID 79 at 230 s
    assert lost.exists() and peer.stat().st_mtime_ns > lost.stat().st_mtime_ns


def test_the_2_29_layout_is_one_last_collective_per_communicator_with_its_rank(short_root):
    run(short_root, "2.29", 30)
    for buckets in files(short_root, "node01").values():
        assert {b.layout for b in buckets} == {"2.29"} and {b.kind for b in buckets} == {"collective"}
        by_comm = {b.label("comm_id"): b for b in buckets}
        assert len(by_comm) == 2                        # DP and TP: point-to-point is not in 2.29's files
        dp = [b for b in buckets if b.label("nranks") == "8"][0]
        assert (dp.operation, dp.label("message_size"), dp.label("hostname")) == ("AllReduce", "6.00MB", "node01")
        assert 4 <= int(dp.label("rank")) < 8 and dp.label("gpu_device_id").startswith("GPU")
        assert set(dict(dp.values)) == {"nccl_algorithm_bandwidth_gbs", "nccl_bus_bandwidth_gbs",
                                        "nccl_collective_exec_time_microseconds"}


def test_every_rank_reports_the_jobs_pace_and_a_lost_one_stops(short_root):
    model, _, reports = run(short_root, "2.30", 270, with_sockets=True)
    assert reports["node02"] == []                       # not in the job
    by_rank = {}
    for r in reports["node00"] + reports["node01"]:
        by_rank.setdefault(r.identity.rank, []).append(r)
    assert sorted(by_rank, key=int) == [str(i) for i in range(8)]
    last = {rank: rs[-1] for rank, rs in by_rank.items()}
    assert last["3"].steps < last["0"].steps             # rank 3 (node00 GPU 3) died at 230 s
    ends = {r.end for rank, r in last.items() if rank != "3"}
    assert len(ends) == 1                                # one synchronous job: one step end for all
    alive = last["0"]
    assert alive.identity == stepfeed.Identity("4242", "0", "0", str(model.topo.identity["uuid"][0]))
    # the slowest rank's compute (0.7x clock) plus the all-reduce; the 50 s hang stretches one step
    assert alive.seconds / alive.steps == pytest.approx(1.5 * 0.75 / 0.7 + 1.5 * 0.25, rel=0.25)
    counts = [r.steps for r in by_rank["0"]]
    assert counts == sorted(counts)
    hung = [r.steps for r in by_rank["0"] if 160 <= r.end - 1_767_225_600.0 <= 200]
    assert len(set(hung)) <= 1                           # no step ended during the hang


# ------------------------------------------------------------------------------------------ live, with the agent

def value(text: str, metric: str, **labels: str) -> list[float]:
    out = []
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]))
            if all(got.get(k) == v for k, v in labels.items()):
                out.append(float(line.rsplit(" ", 1)[1]))
    return out


@pytest.mark.integration
def test_sim_run_and_the_agent_serve_inspector_series_and_step_counts(short_root, stack):   # stack stops first
    scenario = short_root / "pace.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO | {"duration_s": 3600, "faults": SCENARIO["faults"][:1]}))
    sim = stack.add(stack_mod.start_process("sim", [sys.executable, "-m", "lockstep", "sim", "run", str(scenario),
                                                    "--root", str(short_root / "sim"), "--speed", "30"],
                                            short_root / "simlog", "", ready_path=None))
    node = short_root / "sim" / "node01"
    stack_mod.wait_on(lambda: (node / "gpus.json").exists(), 60, "the simulated node", [sim])
    agent = stack.add(stack_mod.start_on_port("lockstep-exporter", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults", "--collector.jobs", "--collector.nccl-inspector", "--collector.steps",
        f"--sim.node-root={node}"], short_root / "agent", ready_path="/metrics", timeout=60))

    def scrape() -> str:
        return stack_mod.http_get(agent.url + "/metrics", timeout=10)[1].decode()

    stack_mod.wait_on(lambda: len(value(scrape(), pace.RANK_STEPS.name, job_id="4242")) == 4, 60,
                      "the four ranks' step counts", [sim, agent])
    stack_mod.wait_on(lambda: len(value(scrape(), ni.EXEC_TIME.name, job_id="4242", comm_name="DP",
                                        message_size="25-26MB")) == 4, 60, "the Inspector files", [sim, agent])
    first = value(scrape(), pace.RANK_STEPS.name, rank="6")[0]
    stack_mod.wait_on(lambda: value(scrape(), pace.RANK_STEPS.name, rank="6")[0] > first, 60, "more steps",
                      [sim, agent])
    text = scrape()
    times = {g: value(text, ni.EXEC_TIME.name, gpu=g, comm_name="DP", message_size="25-26MB")[0] for g in "0123"}
    assert min(times, key=times.get) == "2"               # node01 GPU 2 is the throttled one
    assert value(text, "lockstep_scrape_collector_success", collector="steps") == [1.0]
    assert value(text, "lockstep_scrape_collector_success", collector="nccl-inspector") == [1.0]


HOST_SLOW = {"name": "host", "seed": 9, "duration_s": 300, "sample_period_s": 5, "noise": "none",
             "cluster": {"nodes": 2, "gpus_per_node": 4, "nodes_per_rack": 2, "rack_budget_watts": 60000},
             "job": {"job_id": "77", "nodes": 2, "step_time_s": 1.5},
             "faults": [{"kind": "host_slow", "source": "data_loader", "node": "node01", "gpu": 2, "start_s": 60,
                         "end_s": 300, "slowdown": 1.5}]}


def test_a_slow_host_hides_from_the_gpu_counters_but_not_from_the_jobs_pace():
    """The rank whose host hands its GPU work late: its GPU computes and waits as long as its peers' (the same
    counters), its own step time is longer by the host's share, and in NCCL Inspector's dump it arrives last at
    the all-reduce (the shortest execution time) while its peers wait for it."""
    from lockstep.simulator.inspector import dumped_exec_s, job_comms
    from lockstep.simulator.truth import stragglers
    scenario = parse_scenario(HOST_SLOW, "host.yaml")
    model = Model(scenario, start_timestamp=1_767_225_600.0)
    slow = model.topo.flat("node01", 2)
    pos = int(list(model.topo.job_gpus.nonzero()[0]).index(slow))
    dp = job_comms(model.topo)[0]
    c0 = 1.5 * 0.75                                       # the step's compute (simulator/hardware.py COMPUTE_SHARE)
    checked = 0
    for state in model.states(61):
        if state.t < 120:                                  # a whole dump interval after the onset
            continue
        for key, tolerance in (("sm_active", 0.0), ("tensor_active", 0.0), ("clock_sm", 15), ("power_mw", 20_000)):
            values = state.gpu[key][model.topo.job_gpus]   # board power carries a sensor's noise of 6 W (1 sigma)
            assert values[pos] == pytest.approx(np.median(values), abs=tolerance), key
        busy = state.rank_busy_s
        peers = [b for i, b in enumerate(busy) if i != pos]
        assert busy[pos] - max(peers) == pytest.approx(0.5 * c0, rel=0.01)
        exec_s = dumped_exec_s(model.topo, state, dp, dp.ops[0])
        assert exec_s.argmin() == pos
        assert min(e for i, e in enumerate(exec_s) if i != pos) > 10 * exec_s[pos]
        checked += 1
    assert checked > 30
    assert state.ledger["straggler"]["host"] > 0 and state.ledger["straggler"]["transient"] == 0
    (truth,) = stragglers(scenario)
    assert (truth["node"], truth["gpu"], truth["cause"]) == ("node01", "2", "host")
