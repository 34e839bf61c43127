"""The simulator's live trees, written tick by tick by the live writer and read back from disk."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from lockstep.exporters.catalog import fabric, storage
from lockstep.exporters.catalog import gpu as gpu_metrics
from lockstep.simulator.live import TreeSink
from lockstep.simulator.model import Model
from lockstep.simulator.series import series_frame
from tests.helpers.sim_scenarios import exact

PERIOD = 5.0


def ticks(name: str, root: Path, only: tuple[float, ...] | None = None):
    """Write the scenario's trees under ``root`` tick by tick (or only at the ``only`` times, as a
    slow reader would see them); yields simulated time t after each write."""
    scenario = exact(name)
    model = Model(scenario)
    sink = TreeSink(model.topo, root, scenario.job.job_id)
    for state in model.states(scenario.ticks):
        if only is None or state.t in only:
            sink.write(state)
            yield state.t


def port(root: Path, node: str, hca: int, name: str, sub: str = "counters") -> int:
    return int((root / node / "sys/class/infiniband" / f"mlx5_{hca}" / "ports/1" / sub / name).read_text())


def port_text(root: Path, node: str, hca: int, name: str) -> str:
    return (root / node / "sys/class/infiniband" / f"mlx5_{hca}" / "ports/1" / name).read_text().strip()


def ethtool(root: Path, node: str) -> dict[str, dict[str, int]]:
    """``ethtool -S`` statistics of every interface of ``node``."""
    out = {}
    for f in sorted((root / node / "ethtool").glob("*/statistics")):
        lines = f.read_text().splitlines()
        assert lines[0] == "NIC statistics:"
        out[f.parent.name] = {k.strip(): int(v) for k, v in (line.split(":") for line in lines[1:])}
    return out


def gpus(root: Path, node: str) -> list[dict]:
    return json.loads((root / node / "gpus.json").read_text())["gpus"]


def lustre(root: Path, node: str) -> dict[str, int]:
    """Sum (bytes) or count (ops) per line of the llite stats file."""
    (stats,) = (root / node / "proc/fs/lustre/llite").glob("*/stats")
    out = {}
    for line in stats.read_text().splitlines()[1:]:
        name, count, *rest = line.split()
        out[name] = int(rest[-1]) if rest[1] == "[bytes]" else int(count)
    return out


def rail_iface(root: Path, node: str, hca: int) -> str:
    (net,) = (root / node / "sys/class/infiniband" / f"mlx5_{hca}" / "device/net").iterdir()
    return net.name


def all_counters(root: Path, nodes: tuple[str, ...] = ("node00", "node01", "node02", "node03")) -> dict[str, int]:
    out = {}
    for node in nodes:
        for f in root.glob(f"{node}/sys/class/infiniband/*/ports/1/*counters/*"):
            out[str(f)] = int(f.read_text())
        for iface, stats in ethtool(root, node).items():
            out.update({f"{node}/{iface}/{k}": v for k, v in stats.items()})
        out.update({f"{node}/lustre/{k}": v for k, v in lustre(root, node).items()})
        out.update({f"{node}/gpu{g['index']}/energy": g["energy_mj"] for g in gpus(root, node)})
        for line in (root / node / "proc/diskstats").read_text().splitlines():
            fields = line.split()
            out.update({f"{node}/{fields[2]}/{i}": int(v) for i, v in enumerate(fields[3:]) if i != 8})
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["link-flap", "pause-storm", "checkpoint"])
def test_counters_never_decrease(tmp_path: Path, name: str) -> None:
    last: dict[str, int] = {}
    grew = set()
    for _ in ticks(name, tmp_path):
        now = all_counters(tmp_path, ("node01", "node02"))  # the faulted nodes and a healthy one
        for key, value in last.items():
            assert now[key] >= value, f"{key} went from {value} to {now[key]}"
            if now[key] > value:
                grew.add(key)
        last = now
    assert any("port_xmit_data" in k for k in grew) and any("energy" in k for k in grew)


@pytest.mark.parametrize("name,node,gpu,bits,absent", [
    ("gpu-throttle-thermal", "node01", 2, 0x20 | 0x40, 0x4),
    ("gpu-throttle-power", "node02", 5, 0x4, 0x60),
])
def test_throttled_gpu_has_lower_clock_and_the_matching_reason(tmp_path, name, node, gpu, bits, absent) -> None:
    seen = {t: gpus(tmp_path, node) for t in ticks(name, tmp_path, (50.0, 150.0))}
    before, during = seen[50.0][gpu], seen[150.0][gpu]
    assert before["clock_event_reasons"] == 0 and before["clocks_mhz"]["sm"] >= 1950
    assert during["clock_event_reasons"] & bits == bits and during["clock_event_reasons"] & absent == 0
    assert during["clocks_mhz"]["sm"] <= 0.85 * during["max_clocks_mhz"]["sm"]
    peers = [g for g in seen[150.0] if g["index"] != gpu]
    assert all(p["clock_event_reasons"] == 0 and p["clocks_mhz"]["sm"] >= 1950 for p in peers)
    if bits == 0x4:  # power capped: drawing at its limit
        assert during["power_mw"] >= 0.98 * during["power_limit_mw"]
    else:            # thermal: hot
        assert during["temperature_c"] >= 85 > before["temperature_c"]


def test_whole_job_slows_while_one_gpu_is_slow(tmp_path: Path) -> None:
    """All-reduce traffic per interval is proportional to the job's steps; a healthy node shows it."""
    data, seen = {}, {}
    for t in ticks("gpu-throttle-thermal", tmp_path, (25.0, 50.0, 95.0, 105.0, 150.0, 195.0, 205.0, 295.0)):
        data[t] = sum(port(tmp_path, "node03", h, "port_xmit_data") for h in range(8))
        if t in (50.0, 150.0):
            seen[t] = gpus(tmp_path, "node03")

    def rate(a: float, b: float) -> float:
        """The mean traffic per interval from the one ending at ``a + PERIOD`` to the one ending at ``b``:
        the intervals' differences add up to the counter's difference (read only at the two ticks)."""
        return (data[b] - data[a]) / ((b - a) / PERIOD)

    healthy, slow, after = rate(25.0, 95.0), rate(105.0, 195.0), rate(205.0, 295.0)
    assert slow < 0.85 * healthy and after > 0.97 * healthy
    # node03's GPUs wait in NCCL for the slow one: still "utilized", but idle SMs and low power
    for before, during in zip(seen[50.0], seen[150.0]):
        assert during["utilization"]["gpu"] >= 95
        assert during["prof"]["sm_active"] < before["prof"]["sm_active"] - 0.1
        assert during["power_mw"] < before["power_mw"] - 50_000


def test_pause_counters_rise_only_on_the_faulted_nic_and_priority(tmp_path: Path) -> None:
    snaps = {t: {n: ethtool(tmp_path, n) for n in ("node00", "node01", "node02", "node03")}
             for t in ticks("pause-storm", tmp_path, (95.0, 155.0))}
    storm_iface = rail_iface(tmp_path, "node01", 1)
    for node, ifaces in snaps[155.0].items():
        for iface, after in ifaces.items():
            before = snaps[95.0][node][iface]
            pause_keys = [k for k in after if "pause" in k or "storm" in k]
            assert not [k for k in pause_keys if re.match(r"[rt]x_prio[0-24-7]_pause", k)], "PFC only on prio 3"
            if (node, iface) == ("node01", storm_iface):
                assert after["tx_prio3_pause"] - before["tx_prio3_pause"] > 100_000
                assert after["tx_prio3_pause_duration"] - before["tx_prio3_pause_duration"] > 0.9 * 60e6 * 0.9
                assert after["rx_prio3_pause"] > before["rx_prio3_pause"]
                assert after["tx_pause_storm_warning_events"] > before["tx_pause_storm_warning_events"]
            else:
                assert {k: after[k] for k in pause_keys} == {k: before[k] for k in pause_keys}, (node, iface)


def test_hang_silences_traffic_and_io(tmp_path: Path) -> None:
    snap = {t: (all_counters(tmp_path), gpus(tmp_path, "node02"))
            for t in ticks("hang", tmp_path, (60.0, 100.0, 105.0, 200.0))}
    moving = [k for k in snap[60.0][0] if re.search(r"port_(xmit|rcv)_data|lustre/read_bytes|vport_rdma", k)]
    assert all(snap[100.0][0][k] > snap[60.0][0][k] for k in moving)
    assert {k: snap[200.0][0][k] for k in moving} == {k: snap[105.0][0][k] for k in moving}
    for g in snap[200.0][1]:
        assert g["utilization"]["gpu"] >= 95 and g["prof"]["sm_active"] < 0.1 and g["power_mw"] < 200_000


@pytest.mark.slow
def test_checkpoint_is_a_write_burst_with_idle_gpus(tmp_path: Path) -> None:
    io, seen = {}, {}
    for t in ticks("checkpoint", tmp_path):
        io[t] = lustre(tmp_path, "node01")
        if t in (90.0, 120.0):
            seen[t] = gpus(tmp_path, "node01")

    def delta(t: float, k: str) -> float:
        return io[t][k] - io[t - PERIOD][k]

    burst = [delta(t, "write_bytes") for t in np.arange(105.0, 135.0, PERIOD)]
    quiet = [delta(t, "write_bytes") for t in np.arange(40.0, 100.0, PERIOD)]
    assert min(burst) > 100 * max(quiet) and sum(burst) > 4e11
    assert all(delta(t, "read_bytes") == 0 for t in np.arange(105.0, 135.0, PERIOD))
    for busy, idle in zip(seen[90.0], seen[120.0]):
        assert busy["utilization"]["gpu"] >= 95 and idle["utilization"]["gpu"] <= 10
        assert idle["clock_event_reasons"] & 0x1 and idle["power_mw"] < 150_000


def test_link_flap_drops_the_port_and_counts(tmp_path: Path) -> None:
    states, downed = set(), {}
    for t in ticks("link-flap", tmp_path, tuple(np.arange(95.0, 140.0, PERIOD)) + (300.0,)):
        states.add(port_text(tmp_path, "node02", 4, "state"))
        downed[t] = [port(tmp_path, n, h, "link_downed") for n in ("node01", "node02") for h in range(8)]
    assert states == {"4: ACTIVE", "1: DOWN"}
    assert port_text(tmp_path, "node02", 4, "phys_state") == "5: LinkUp"
    changed = [i for i, (a, b) in enumerate(zip(downed[95.0], downed[300.0])) if a != b]
    assert changed == [8 + 4] and downed[300.0][12] - downed[95.0][12] == 3


def test_xid_79_marks_the_gpu_lost(tmp_path: Path) -> None:
    seen = {t: gpus(tmp_path, "node03")[6] for t in ticks("xid", tmp_path, (100.0, 155.0))}
    assert not seen[100.0]["lost"] and [e["xid"] for e in seen[100.0]["xid_events"]] == [48]
    assert seen[155.0]["lost"] and [e["xid"] for e in seen[155.0]["xid_events"]] == [48, 79]
    assert [e["seq"] for e in seen[155.0]["xid_events"]] == sorted(e["seq"] for e in seen[155.0]["xid_events"])


def test_live_files_hold_the_series_numbers_at_the_same_tick(tmp_path: Path) -> None:
    frame = series_frame(exact("pause-storm"))
    start = frame["timestamp"].min()
    picked = {}
    for t in ticks("pause-storm", tmp_path, (0.0, 120.0, 300.0)):
        picked[t] = (gpus(tmp_path, "node01"), port(tmp_path, "node01", 1, "port_xmit_data"),
                     ethtool(tmp_path, "node01")[rail_iface(tmp_path, "node01", 1)], lustre(tmp_path, "node01"))
    for t, (gs, words, stats, fs) in picked.items():
        rows = frame[(frame.timestamp == start + t) & (frame.node == "node01")]

        def value(metric, at=rows, **labels: str) -> float:
            return at[(at.metric == metric.name) & np.logical_and.reduce([at[k] == v for k, v in labels.items()])]["value"].item()

        assert value(fabric.IB_TRANSMIT_BYTES, device="mlx5_1") == words * 4
        assert value(fabric.PFC_PAUSE_DURATION, interface=rail_iface(tmp_path, "node01", 1),
                     priority="3", direction="tx") == stats["tx_prio3_pause_duration"] / 1e6
        assert value(gpu_metrics.POWER, gpu="1") == gs[1]["power_mw"] / 1000
        assert value(gpu_metrics.ENERGY, gpu="1") == gs[1]["energy_mj"] / 1000
        assert value(gpu_metrics.SM_CLOCK, gpu="1") == gs[1]["clocks_mhz"]["sm"] * 1e6
        lustre_read = rows[(rows.metric == storage.READ_BYTES.name) & (rows.fstype == "lustre")]
        assert lustre_read["value"].item() == fs.get("read_bytes", 0)


def test_a_reader_holding_a_counter_open_sees_new_values(tmp_path: Path) -> None:
    """Like real sysfs (and the exporter's held descriptors): pread at offset 0 returns the update."""
    fd, values = None, []
    try:
        for _ in ticks("baseline", tmp_path, (5.0, 10.0, 15.0)):
            path = tmp_path / "node00/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"
            fd = os.open(path, os.O_RDONLY) if fd is None else fd
            values.append(int(os.pread(fd, 64, 0)))
    finally:
        if fd is not None:
            os.close(fd)
    assert values[0] < values[1] < values[2]


def test_job_nodes_get_the_slurm_gpu_job_mapping_read_by_the_jobs_collector(tmp_path):
    from lockstep.exporters.collectors.jobs import JobsCollector, SlurmSource

    scenario = exact("thermal-straggler")
    next(ticks("thermal-straggler", tmp_path))
    job_nodes, node_names = set(scenario.job.nodes), sorted(p.name for p in tmp_path.iterdir())
    for node in node_names:
        mapping = tmp_path / node / "gpu-jobs"
        assert mapping.is_dir() == (node in job_nodes), node
    node = tmp_path / "node05"
    collector = JobsCollector(SlurmSource(node / "gpu-jobs", node / "gpu-jobs-users"), None, lambda: {})
    samples = sorted((s.labels[0], s.labels[2], s.labels[3]) for s in collector.collect())
    assert samples == [(str(g), scenario.job.job_id, "sim") for g in range(8)]


def test_the_sim_node_root_shorthand_points_at_what_the_simulator_writes(tmp_path):
    """``lockstep exporter --sim.node-root DIR/<node>`` (docs/architecture.md) reads the sources where the
    live writer puts them: both take the paths from one layout, checked here against the files."""
    from lockstep.exporters.collectors.jobs import JobsOptions
    from lockstep.exporters.collectors.pfc import PfcOptions
    from tests.helpers.exporter_args import exporter_config

    next(ticks("baseline", tmp_path))
    config = exporter_config(f"--sim.node-root={tmp_path / 'node02'}")
    assert config.node_name == "node02"
    assert (config.sysfs / "class/infiniband/mlx5_7/ports/1/counters/port_xmit_data").is_file()
    assert (config.procfs / "self/mountstats").is_file() and (config.procfs / "diskstats").is_file()
    assert len(list(PfcOptions.from_config(config).source.glob("*/statistics"))) == 8
    jobs = JobsOptions.from_config(config)
    assert json.loads(jobs.gpu.sim_path.read_text())["gpus"][0]["index"] == 0
    assert (jobs.mapping_dir / "7").read_text() == "5001\n" and (jobs.user_dir / "5001").read_text() == "sim\n"


def test_the_job_io_collector_reads_the_jobs_cgroup_under_the_sim_node_root(tmp_path):
    """Each job node holds the job's Slurm cgroup v2 group (io.stat, io.pressure) and a mount table naming its
    devices; the job-io collector, pointed at the node by ``--sim.node-root``, reads the job's cache-device I/O
    and its I/O pressure: the loaders' few waits while the input keeps up, and, while the file system caps the
    reads (input-starvation.yaml: 4 GB a step at 1.87 GB/s against a 1.5 s step), the ranks' waiting for input
    (about (4 / 1.87 - 1.5) / (4 / 1.87) ≈ 0.30 of the time)."""
    from lockstep.exporters.collectors.job_io import JobIoCollector, JobIoOptions
    from tests.helpers.exporter_args import exporter_config

    seen, collector = {}, None
    for t in ticks("input-starvation", tmp_path, (300.0, 400.0, 800.0, 900.0)):
        options = JobIoOptions.from_config(exporter_config(f"--sim.node-root={tmp_path / 'node01'}"))
        collector = collector or JobIoCollector(options, lambda: {})
        seen[t] = {(s.metric.name, s.labels): s.value for s in collector.collect()}
    device = ("5501", "slurm", "", "259:3", "/scratch", "xfs")
    read = storage.JOB_IO_READ_BYTES.name
    assert seen[400.0][(read, device)] > seen[300.0][(read, device)] > 0
    full = storage.JOB_IO_PRESSURE.name
    def share(a, b, kind):
        return (seen[b][(full, device[:3] + (kind,))] - seen[a][(full, device[:3] + (kind,))]) / (b - a)
    assert share(300.0, 400.0, "full") < 0.01 and 0.01 < share(300.0, 400.0, "some") < 0.05
    assert 0.2 < share(800.0, 900.0, "full") < 0.4


def test_a_pods_cgroup_is_written_where_the_job_runs_as_pods(tmp_path):
    """Presented as pods, each job node holds its pod's group (kubepods.slice, the pod's UID); the job-io collector
    names it by the pod and, through the job mapping (here the pods' UIDs given), by the job."""
    from lockstep.exporters.catalog.simlayout import SimCluster
    from lockstep.exporters.collectors.job_io import JobIoCollector, JobIoOptions
    from lockstep.simulator.kube import job_pods
    from lockstep.simulator.tree.cgroup import CgroupWriter
    from lockstep.simulator.tree.files import TreeWriter
    from tests.helpers.exporter_args import exporter_config

    scenario = exact("thermal-straggler")
    model = Model(scenario)
    writer, cgroups, cluster = TreeWriter(), CgroupWriter(model.topo, scenario.job.job_id), SimCluster(tmp_path)
    for state in model.states(3):
        pods = job_pods(model.topo, state.t)
        for n, name in enumerate(model.topo.nodes):
            cgroups.write(writer, cluster.node(name), n, state, pods)
    pod = next(p for p in pods if p.node == "node05")
    assert not any((tmp_path / name / "sys/fs/cgroup/system.slice").exists() for name in model.topo.nodes)
    options = JobIoOptions.from_config(exporter_config(f"--path.sysfs={tmp_path / 'node05' / 'sys'}"))
    samples = JobIoCollector(options, lambda: {pod.uid: "team-a/llm"}).collect()
    assert {s.labels[:3] for s in samples} == {("team-a/llm", "kubernetes", pod.uid)}
    assert {s.metric.name for s in samples} >= {storage.JOB_IO_READ_BYTES.name, storage.JOB_IO_PRESSURE.name}
