"""NCCL Inspector's Prometheus files for the simulated job: one per job GPU under ``DIR/<node>/nccl-inspector/``,
as NCCL 2.30 or 2.29 writes them (``lockstep sim run --nccl-inspector``; format facts and sources:
tests/fixtures/nccl-inspector/README.md; what is simulated: FORMATS.md).

Every ``INTERVAL_S`` of simulated time each rank's process rewrites its GPU's file in place, as NCCL's dump thread
does (truncate, then one write and flush per bucket): 2.30 only where the rank completed operations in the
interval (a hung job's files age), 2.29 always (empty when nothing completed). A rank whose GPU is lost dies
without removing its file. The job's communicators: ``DP`` (every rank: gradient all-reduce buckets), ``TP`` (the
ranks of one node: all-gather and reduce-scatter), and on a job of several nodes ``PP`` pairs (a GPU and the same
GPU of the next node, named by the two nodes' places in the job: send and receive of activations, point-to-point,
written by 2.30 only; 2.30 buckets by name, so a node's two pairs are two communicators).

Execution time per call: latency plus bus bytes over the fabric's bus bandwidth (NVLink within a node, the GPU's
rail between nodes, slower while the rails are degraded), plus the time the rank waits inside the kernel for the
communicator's last rank to arrive, averaged over the interval's steps as 2.30 averages its buckets
(``State.dump_wait_s``; the series frame holds the data-parallel all-reduce's large bucket, ``dumped_exec_s``).
The slowest rank arrives last and waits least: its execution time is the
shortest and its bandwidth the highest, while its peers show long times and low bandwidths. Bandwidths follow from
the time as NCCL computes them (``inspectorComputeOpBw``).
"""
from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator import hardware as hw
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology

VERSIONS = ("2.30", "2.29")
INTERVAL_S = hw.INSPECTOR_INTERVAL_S
FORMAT_VERSION = "v5.1"           # 2.30: "v<NCCL_PROFILER_INTERFACE_VERSION>.<kInspectorPromFormatMinor>"
MIB = 1 << 20
# Bus bandwidth a large message reaches (GB/s of bus bytes) and the fixed cost of one call (s). Within a node:
# H100 NVLink 4 (NVLS all-reduce above ring); between nodes: each GPU's own 400 Gb/s rail, all rails at once for
# the ring collectives, one rail for a point-to-point pair.
INTRA_BUS_GBS = {"AllReduce": 470.0, "AllGather": 370.0, "ReduceScatter": 370.0, "Send": 380.0, "Recv": 380.0}
RAIL_EFFICIENCY = 0.9
INTRA_LATENCY_S, INTER_LATENCY_S = 15e-6, 40e-6
JITTER = 0.01


@dataclass(frozen=True)
class Op:
    kind: str            # "collective" or "p2p"
    name: str            # NCCL's function name
    size: int            # NCCL's msgSizeBytes (per rank for AllGather and ReduceScatter)
    per_step: int        # calls per training step
    algo_proto: str      # "<ncclAlgoToString>_<ncclProtoToString>"


@dataclass(frozen=True)
class Comm:
    name: str                    # the application's name for it (2.30's comm_name)
    hash: int                    # NCCL's communicator hash (2.29's comm_id)
    members: tuple[int, ...]     # positions among the job's GPUs, in rank order
    nodes: int
    ops: tuple[Op, ...]


def job_comms(topo: Topology) -> list[Comm]:
    gpus = np.flatnonzero(topo.job_gpus)
    nodes = sorted({int(topo.gpu_node[g]) for g in gpus})
    by_node = {n: tuple(i for i, g in enumerate(gpus) if topo.gpu_node[g] == n) for n in nodes}
    multi = len(nodes) > 1
    dp_algo = "RING_SIMPLE" if multi else "NVLS_SIMPLE"
    comms = [Comm("DP", 0x51D0_0000_0000 + topo.scenario.seed, tuple(range(len(gpus))), len(nodes),
                  (Op("collective", "AllReduce", 25 * MIB, 4, dp_algo),
                   Op("collective", "AllReduce", 6 * MIB, 1, dp_algo)))]
    for n in nodes:
        comms.append(Comm("TP", 0x7E00_0000_0000 + n, by_node[n], 1,
                          (Op("collective", "AllGather", 16 * MIB, 2, "RING_SIMPLE"),
                           Op("collective", "ReduceScatter", 16 * MIB, 2, "RING_SIMPLE"))))
    for a, b in zip(nodes, nodes[1:]):
        for i, j in zip(by_node[a], by_node[b]):
            comms.append(Comm(f"PP {a}-{b}", 0x9900_0000_0000 + 1000 * a + i, (i, j), 2,
                              (Op("p2p", "Send", 8 * MIB, 4, ""), Op("p2p", "Recv", 8 * MIB, 4, ""))))
    return comms


def dumped_exec_s(topo: Topology, s: State, comm: Comm, op: Op) -> np.ndarray:
    """Per job rank, the mean execution time of ``comm``'s ``op`` bucket in the last dump (2.30's value; NaN
    before the first): its own time plus the mean wait per call for the communicator's last rank over the
    interval's steps (``State.dump_wait_s``: the rank that arrives last waits least)."""
    m0 = topo.scenario.job.step_time_s * (1 - hw.COMPUTE_SHARE)
    net = max(1.0, s.dump_comm_s / m0) if m0 > 0 else 1.0
    if s.dump_wait_s is None:
        return np.full(len(s.rank_busy_s), np.nan)
    calls = sum(o.per_step for o in comm.ops)
    jitter = 1 + JITTER * np.random.default_rng([topo.scenario.seed, s.dumps, 0x1A5]).standard_normal(len(s.dump_wait_s))
    return (exec_time(op, comm, topo.gpus_per_node, net) + s.dump_wait_s / calls) * jitter


def traffic(op: Op, nranks: int) -> tuple[float, float]:
    """(algorithm bytes, bus factor) as NCCL's ``inspectorComputeOpBw`` takes them."""
    if op.name == "AllReduce":
        return float(op.size), 2.0 * (nranks - 1) / nranks
    if op.name in ("AllGather", "ReduceScatter"):
        return float(op.size * nranks), (nranks - 1) / nranks
    return float(op.size), 1.0


def exec_time(op: Op, comm: Comm, gpus_per_node: int, net_factor: float) -> float:
    """One call's own time (no waiting): latency plus bus bytes at the fabric's bus bandwidth."""
    algo_bytes, factor = traffic(op, len(comm.members))
    if comm.nodes == 1:
        return INTRA_LATENCY_S + algo_bytes * factor / (INTRA_BUS_GBS[op.name] * 1e9)
    rails = gpus_per_node if op.kind == "collective" else 1
    bus = min(INTRA_BUS_GBS[op.name] * 1e9, rails * hw.LINK_RATE_BPS * RAIL_EFFICIENCY)
    return (INTER_LATENCY_S + algo_bytes * factor / bus) * net_factor


def bandwidths(op: Op, nranks: int, seconds: float) -> tuple[float, float]:
    """(algorithm, bus) bandwidth in GB/s of a call of ``seconds``."""
    algo_bytes, factor = traffic(op, nranks)
    algo = algo_bytes / 1.0e9 / seconds
    return algo, algo * factor


def size_range(size: int) -> str:
    """2.30's ``message_size``: ``inspectorPromFormatMessageSizeRange``."""
    if size == 0:
        return "0B"
    units, value, i = ("B", "KB", "MB", "GB", "TB"), float(size), 0
    while value >= 1024.0 and i < 4:
        value /= 1024.0
        i += 1
    lower = max(1.0, math.floor(max(value, 1.0)))
    return f"{lower:.0f}-{lower + 1:.0f}{units[i]}"


def size_human(size: int) -> str:
    """2.29's ``message_size``: ``inspectorFormatHumanReadableSize``."""
    units, value, i = ("B", "KB", "MB", "GB", "TB"), float(size), 0
    while value >= 1024.0 and i < 4:
        value /= 1024.0
        i += 1
    return f"{size}B" if i == 0 else f"{value:.2f}{units[i]}"


def g6(value: float) -> str:
    """C's ``%.6g``."""
    return "%.6g" % value


class InspectorWriter:
    """Writes every job rank's file at each dump; ``write(state)`` is called once per tick."""

    def __init__(self, topo: Topology, nodes: list[SimNode], version: str, slurm_job_id: str,
                 interval_s: float = INTERVAL_S) -> None:
        if version not in VERSIONS:
            raise ValueError(f"NCCL Inspector version {version!r} is not one of {', '.join(VERSIONS)}")
        self.topo, self.nodes, self.version, self.interval = topo, nodes, version, interval_s
        self.slurm_job_id = slurm_job_id or "unknown"
        self.comms = job_comms(topo)
        self.gpus = np.flatnonzero(topo.job_gpus)
        self.next_dump = interval_s
        self.steps_at_dump = 0.0
        m0 = topo.scenario.job.step_time_s * (1 - hw.COMPUTE_SHARE)
        self.m0 = m0

    def path(self, pos: int) -> Path:
        g = int(self.gpus[pos])
        node = self.nodes[int(self.topo.gpu_node[g])]
        uuid = str(self.topo.identity["uuid"][g])
        return node.nccl_inspector / f"nccl_inspector_metrics_{uuid.removeprefix('GPU-')}.prom"

    def write(self, s: State) -> None:
        if s.t < self.next_dump:
            return
        self.next_dump = (math.floor(s.t / self.interval) + 1) * self.interval
        steps = s.steps - self.steps_at_dump
        self.steps_at_dump = s.steps
        rng = np.random.default_rng([self.topo.scenario.seed, s.k, 0x1A5])
        net = max(1.0, s.dump_comm_s / self.m0) if self.m0 > 0 else 1.0
        wait = s.dump_wait_s if s.dump_wait_s is not None else np.zeros(len(self.gpus))
        dp = self.comms[0]
        series = dumped_exec_s(self.topo, s, dp, dp.ops[0])    # the series frame's value of this bucket
        for pos in range(len(self.gpus)):
            g = int(self.gpus[pos])
            if s.lost[g] or s.missing[g]:
                continue                                    # the process died: its file stays as it was
            lines = self._lines(pos, np.nan_to_num(wait), net, steps, s, rng, series[pos]) if steps >= 1 else []
            if lines or self.version == "2.29":
                self._rewrite(self.path(pos), lines)

    def _lines(self, pos: int, wait: np.ndarray, net: float, steps: float, s: State,
               rng: np.random.Generator, dp_large: float) -> list[str]:
        """``wait``: each rank's mean wait per step for the job's last rank over the interval; within a
        communicator of some ranks, the wait for its own last one is the difference to that one's."""
        g = int(self.gpus[pos])
        node, gpu = self.topo.nodes[int(self.topo.gpu_node[g])], int(self.topo.gpu_index[g])
        out = []
        for comm in self.comms:
            if pos not in comm.members:
                continue
            calls = sum(op.per_step for op in comm.ops)
            whole = len(comm.members) == len(self.gpus)
            waited = float(wait[pos] - (0.0 if whole else min(wait[list(comm.members)]))) / calls
            timed = []
            for op in comm.ops:
                seconds = (exec_time(op, comm, self.topo.gpus_per_node, net) + waited) * (1 + JITTER * rng.standard_normal())
                same = comm is self.comms[0] and op is comm.ops[0] and np.isfinite(dp_large)
                timed.append((op, max(dp_large if same else seconds, 1e-6)))
            if self.version == "2.30":
                out += [self._bucket_2_30(op, comm, seconds, node, gpu) for op, seconds in timed]
            elif comm.ops[0].kind == "collective":
                op, seconds = timed[-1]       # the communicator's last collective of the interval
                sn = int(s.steps * calls)
                out.append(self._last_2_29(op, comm, seconds, node, gpu, comm.members.index(pos), sn, s.timestamp))
        return out

    def _bucket_2_30(self, op: Op, comm: Comm, seconds: float, node: str, gpu: int) -> str:
        head = (f'version="{FORMAT_VERSION}",slurm_job_id="{self.slurm_job_id}",node="{node}",gpu="GPU{gpu}",'
                f'comm_name="{comm.name}",n_nodes="{comm.nodes}",nranks="{len(comm.members)}",')
        _, bus = bandwidths(op, len(comm.members), seconds)
        if op.kind == "collective":
            labels = head + f'collective="{op.name}",message_size="{size_range(op.size)}",algo_proto="{op.algo_proto}"'
            return (f"nccl_bus_bandwidth_gbs{{{labels}}} {g6(bus)}\n"
                    f"nccl_collective_exec_time_microseconds{{{labels}}} {g6(seconds * 1e6)}\n")
        labels = head + f'p2p_operation="{op.name}",message_size="{size_range(op.size)}"'
        return (f"nccl_p2p_bus_bandwidth_gbs{{{labels}}} {g6(bus)}\n"
                f"nccl_p2p_exec_time_microseconds{{{labels}}} {g6(seconds * 1e6)}\n")

    def _last_2_29(self, op: Op, comm: Comm, seconds: float, node: str, gpu: int, rank: int, sn: int,
                   timestamp: float) -> str:
        when = datetime.datetime.fromtimestamp(int(timestamp), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        labels = (f'comm_id="{comm.hash:#x}",hostname="{node}",rank="{rank}",slurm_job="unknown",'
                  f'slurm_job_id="{self.slurm_job_id}",nranks="{len(comm.members)}",n_nodes="{comm.nodes}",'
                  f'gpu_device_id="GPU{gpu}",collective="{op.name}",coll_sn="{sn}",timestamp="{when}",'
                  f'message_size="{size_human(op.size)}"')
        algo, bus = bandwidths(op, len(comm.members), seconds)
        return (f"nccl_algorithm_bandwidth_gbs{{{labels}}} {g6(algo)}\n"
                f"nccl_bus_bandwidth_gbs{{{labels}}} {g6(bus)}\n"
                f"nccl_collective_exec_time_microseconds{{{labels}}} {g6(seconds * 1e6)}\n")

    @staticmethod
    def _rewrite(path: Path, buckets: list[str]) -> None:
        """In place, as NCCL does: truncate, then one write and flush per bucket."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for bucket in buckets:
                f.write(bucket)
                f.flush()
        os.chmod(path, 0o777)   # NCCL's chmod after fopen
