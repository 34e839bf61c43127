"""Which catalog series the series frame holds, and how each value derives from a ``State``.

A ``Block`` is one catalog metric over a fixed set of series (static labels); its ``value`` function
returns one number per series in catalog base units, NaN where the series is absent at that tick
(a lost GPU is not reported; an XID series appears with the first event). The simulated quantities
come from the table in ``signals`` (one block per row with a metric, times its labels); the rest are
derived here: GPU up, clock-event reasons, XIDs, the job's GPUs and ranks, port state, power.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lockstep.exporters.catalog import analytics as A
from lockstep.exporters.catalog import fabric as F
from lockstep.exporters.catalog import gpu as G
from lockstep.exporters.catalog import nccl as N
from lockstep.exporters.catalog import nccl_inspector as NI
from lockstep.exporters.catalog import power as W
from lockstep.exporters.catalog import storage as S
from lockstep.exporters.catalog.enums import CLOCK_EVENT_BITS, IB_PORT_ACTIVE, IDLE_REASON, THERMAL_REASONS
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.catalog.nccl import COLLECTIVES
from lockstep.exporters.catalog.xid import lookup
from lockstep.simulator import hardware as hw
from lockstep.simulator.collectives import REASONS as MISSING_REASONS
from lockstep.simulator.collectives import Answer, RankModel
from lockstep.simulator.faults import fault_xid, members_gone, rank_hangs
from lockstep.simulator.inspector import dumped_exec_s, job_comms, size_range
from lockstep.simulator.signals import GPU, PFC, PORT, STORAGE, STORM, Signal
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology

# The clock-event reasons of the series, one lockstep_gpu_clock_event_active each, in this order: what
# the simulated GPUs raise (idle, power cap, thermal, and a broken GPU's hardware slowdown and power
# brake; faults.py).
REASONS = {reason: CLOCK_EVENT_BITS[reason]
           for reason in (IDLE_REASON, "sw_power_cap", "hw_slowdown", *THERMAL_REASONS, "hw_power_brake_slowdown")}


@dataclass(frozen=True)
class Block:
    metric: Metric
    labels: dict[str, np.ndarray]          # label column -> one string per series (incl. "node")
    value: Callable[[State], np.ndarray]

    @property
    def size(self) -> int:
        return len(next(iter(self.labels.values())))


def build_blocks(topo: Topology) -> list[Block]:
    return ([_gpu_info_block(topo)] + _gpu_blocks(topo) + _job_blocks(topo) + _port_blocks(topo) + _storage_blocks(topo)
            + _power_blocks(topo) + _ras_blocks(topo))


def _gpu_labels(topo: Topology, sel: np.ndarray | None = None) -> dict[str, np.ndarray]:
    sel = np.ones(topo.n_gpus, bool) if sel is None else sel
    return {"node": np.array(topo.nodes)[topo.gpu_node][sel], "gpu": topo.gpu_index[sel].astype(str)}


def _table_blocks(signals: tuple[Signal, ...], labels: dict[str, np.ndarray],
                  shown: Callable[[State, np.ndarray], np.ndarray] = lambda s, v: v) -> list[Block]:
    """One block per row of the table that names a metric: the entity's labels plus the row's own."""
    size = len(next(iter(labels.values())))
    return [Block(signal.metric, {**labels, **{k: np.full(size, v) for k, v in signal.labels}},
                  (lambda signal: lambda s: shown(s, signal.value(s)))(signal))  # noqa: B023 (bound by the call)
            for signal in signals if signal.metric is not None]


def _gpu_info_block(topo: Topology) -> Block:
    """The static facts the node agent reads from NVML (the tree writer's gpus.json), one series per GPU."""
    lab = _gpu_labels(topo)
    n = topo.n_gpus
    info = {**lab, "uuid": topo.identity["uuid"], "name": np.full(n, hw.GPU_NAME),
            "pci_bus_id": np.array([topo.pci_bus_id(int(i)) for i in topo.gpu_index]),
            "driver_version": np.full(n, hw.DRIVER_VERSION)}
    return Block(G.INFO, info, lambda s: np.ones(n))


def _gpu_blocks(topo: Topology) -> list[Block]:
    lab = _gpu_labels(topo)
    def shown(s, v):
        return np.where(s.lost, np.nan, v)
    blocks = [Block(G.UP, lab, lambda s: (~s.lost) * 1.0)]
    blocks += _table_blocks(GPU, lab, shown)
    # as the node agent derives it from the link's width (exporters/gpu/)
    blocks.append(Block(G.PCIE_LINK_DEGRADED, lab,
                        lambda s: shown(s, (s.gpu["pcie_width"] < s.gpu["pcie_width_max"]) * 1.0)))
    for reason, bit in REASONS.items():
        blocks.append(Block(G.CLOCK_EVENT, {**lab, "reason": np.full(topo.n_gpus, reason)},
                            (lambda b: lambda s: shown(s, (s.gpu["reasons"] & b) > 0))(bit)))
    xids = sorted({(topo.flat(f.node, f.gpu), code) for f in topo.scenario.faults
                   if (code := fault_xid(f)) is not None})
    if xids:
        flat = np.array([g for g, _ in xids])
        entries = [lookup(x) for _, x in xids]
        labels = {"node": lab["node"][flat], "gpu": lab["gpu"][flat], "xid": np.array([str(x) for _, x in xids]),
                  "severity": np.array([e.severity for e in entries]),
                  "category": np.array([e.category for e in entries]), "action": np.array([e.action for e in entries])}
        blocks.append(Block(G.XID_ERRORS, labels, lambda s: _xid_counts(s, xids)))
    return blocks


def _xid_counts(s: State, xids: list[tuple[int, int]]) -> np.ndarray:
    counts = np.array([sum(1 for e in s.xid_events if (e[1], e[2]) == key) for key in xids], float)
    return np.where(counts > 0, counts, np.nan)


def _job_blocks(topo: Topology) -> list[Block]:
    sel = topo.job_gpus
    lab = _gpu_labels(topo, sel)
    n, job = int(sel.sum()), topo.scenario.job.job_id
    # The series shows the job the Slurm way (the live simulator can also present it the Kubernetes way).
    info = {**lab, "uuid": topo.identity["uuid"][sel], "job_id": np.full(n, job), "user": np.full(n, "sim"),
            **{label: np.full(n, "") for label in ("rank", "pod", "namespace", "container")},
            "scheduler": np.full(n, "slurm")}
    ranks = {**lab, "job_id": np.full(n, job), "rank": np.arange(n).astype(str)}
    node_of = np.array(topo.nodes)[topo.gpu_node][sel]
    # a member gone (member_lost) leaves the mapping: its pod deleted, or its node agent no longer answering
    gone = lambda s: np.isin(node_of, list(members_gone(topo, s.t)))   # noqa: E731
    return [Block(G.JOB_INFO, info, lambda s: np.where(s.lost[sel] | gone(s), np.nan, 1.0)),
            Block(A.RANK_STEP_SECONDS, ranks, lambda s: np.where(s.lost[sel], np.nan, np.round(s.rank_busy_s, 4))),
            _inspector_block(topo, lab)]


def _inspector_block(topo: Topology, lab: dict[str, np.ndarray]) -> Block:
    """NCCL Inspector's (2.30) mean execution time of the data-parallel all-reduce's large bucket per job GPU, as
    the nccl-inspector collector serves it: held between the 30 s dumps (FORMATS.md, simulator/inspector.py)."""
    sel = topo.job_gpus
    n, dp = int(sel.sum()), job_comms(topo)[0]
    op = dp.ops[0]
    labels = {**lab, "job_id": np.full(n, topo.scenario.job.job_id), "uuid": topo.identity["uuid"][sel],
              "comm_id": np.full(n, ""), "rank": np.full(n, ""),       # 2.29's labels, empty in 2.30's layout
              "comm_name": np.full(n, dp.name), "nranks": np.full(n, str(len(dp.members))),
              "n_nodes": np.full(n, str(dp.nodes)), "collective": np.full(n, op.name),
              "message_size": np.full(n, size_range(op.size)), "algo_proto": np.full(n, op.algo_proto)}
    return Block(NI.EXEC_TIME, labels, lambda s: np.where(s.lost[sel], np.nan, np.round(dumped_exec_s(topo, s, dp, op), 7)))


def _port_blocks(topo: Topology) -> list[Block]:
    n = topo.n_gpus
    lab = {"node": np.array(topo.nodes)[topo.gpu_node], "device": np.array([topo.hca(g) for g in topo.gpu_index]),
           "port": np.full(n, "1")}
    blocks = _table_blocks(PORT, lab)
    blocks.append(Block(F.IB_STATE, lab, lambda s: np.where(s.port_down, 1.0, float(IB_PORT_ACTIVE))))  # 1: down
    blocks.append(Block(F.IB_RATE, lab, lambda s: np.full(n, hw.LINK_RATE_BPS)))
    nic = {"node": np.array(topo.nodes)[topo.gpu_node], "interface": np.array([topo.iface(g) for g in topo.gpu_index])}
    for pi, prio in enumerate(topo.pfc_priorities):
        blocks += _table_blocks(PFC, {**nic, "priority": np.full(n, str(prio))}, (lambda i: lambda s, v: v[:, i])(pi))
    return blocks + _table_blocks(STORM, nic)


def _storage_blocks(topo: Topology) -> list[Block]:
    return _table_blocks(STORAGE, {"node": np.array(topo.nodes)}) + _job_io_blocks(topo)


def _job_io_blocks(topo: Topology) -> list[Block]:
    """The job's cgroup on each of its nodes as the job-io collector reads it from the live tree (tree/cgroup.py):
    its cache device's bytes and its I/O pressure (microseconds in the file, seconds in the metric)."""
    sel = np.asarray(topo.job_nodes, bool)
    n, job = int(sel.sum()), topo.scenario.job.job_id
    group = {"node": np.array(topo.nodes)[sel], "job_id": np.full(n, job), "scheduler": np.full(n, "slurm"),
             "pod_uid": np.full(n, "")}
    device = {**group, "device": np.full(n, hw.CACHE_DEVICE), "mount": np.full(n, "/scratch"), "fstype": np.full(n, "xfs")}
    return [Block(S.JOB_IO_READ_BYTES, device, lambda s: s.storage["job_io_rbytes"][sel].astype(float)),
            Block(S.JOB_IO_WRITE_BYTES, device, lambda s: s.storage["job_io_wbytes"][sel].astype(float)),
            *(Block(S.JOB_IO_PRESSURE, {**group, "kind": np.full(n, kind)},
                    (lambda key: lambda s: s.storage[key][sel] / 1e6)(f"job_io_{kind}_us")) for kind in ("some", "full"))]


def _power_blocks(topo: Topology) -> list[Block]:
    nodes, racks = np.array(topo.nodes), np.array(topo.racks)
    pdu = {"node": np.full(len(racks), ""), "pdu": np.array([topo.pdu_name(r) for r in racks]), "rack": racks}
    budget = topo.scenario.cluster.rack_budget_watts
    cool = {"node": np.array(["", ""]), "target": np.array([topo.cdu_name] * 2), "loop": np.array(["supply", "return"])}
    return [
        Block(W.CHASSIS_POWER, {"node": nodes, "target": nodes}, lambda s: s.power["chassis_w"] * 1.0),
        Block(W.PDU_POWER, pdu, lambda s: s.power["pdu_w"] * 1.0),
        Block(W.PDU_ENERGY, pdu, lambda s: s.power["pdu_j"] * 1.0),
        Block(W.RACK_BUDGET, {"node": pdu["node"], "rack": racks}, lambda s: np.full(len(racks), budget)),
        Block(W.COOLANT_TEMPERATURE, cool, lambda s: np.array([s.coolant["supply_c"], s.coolant["return_c"]])),
    ]


def _ras_blocks(topo: Topology) -> list[Block]:
    """What each job node's agent serves of its last RAS answer (``collectives``): the addresses RAS knows the
    node by, the answer's age, its communicators' sizes, its ranks' collective counts and how far each is behind its
    communicator, and the missing ranks it names (those the scenario's faults can make missing)."""
    model = RankModel(topo)
    job, g, job_id = model.job, model.g, topo.scenario.job.job_id
    if not model.n:
        return []
    names = np.array(topo.nodes)[model.nodes]
    world = next(c for c in job.comms if c.name == "world")
    local = {j: next(c for c in job.comms if c.name == f"node{j}") for j in range(len(names))} if g > 1 else {}
    comms = [(j, world) for j in range(len(names))] + [(j, c) for j, c in local.items()]

    def answered(s: State) -> list[Answer | None]:
        return [a if a is not None and a.status.answering[j] else None for j, a in enumerate(model.answers(s))]

    def per(rows: list, value: Callable[[Answer, object], float], rank: bool = False) -> Callable[[State], np.ndarray]:
        """``rank``: rows of a rank, absent once its GPU is lost (as the GPU's own series are)."""
        gpu_of = model.nodes[[row[2] // g for row in rows]] * g + [row[2] % g for row in rows] if rank else None

        def values(s: State) -> np.ndarray:
            got = answered(s)
            out = np.array([value(got[row[0]], row) if got[row[0]] is not None else np.nan for row in rows])
            return np.where(s.lost[gpu_of], np.nan, out) if rank and len(rows) else out
        return values

    def labels(rows: list, **columns: Callable) -> dict[str, np.ndarray]:
        return {"node": np.array([names[row[0]] for row in rows]), "job_id": np.full(len(rows), job_id),
                **{k: np.array([f(row) for row in rows]) for k, f in columns.items()}}

    hex16 = "{:016x}".format
    blocks = [Block(N.RAS_NODE_ADDRESS, {"node": names, "address": np.array(job.nodes)},
                    lambda s: np.array([1.0 if a is not None else np.nan for a in answered(s)])),
              Block(N.RAS_ANSWER_AGE, {"node": names},
                    lambda s: np.array([s.t - a.at if a is not None else np.nan for a in answered(s)])),
              Block(N.COMMUNICATOR_RANKS, labels(comms, comm=lambda r: hex16(r[1].hash)),
                    per(comms, lambda a, r: float(len(r[1].members))))]
    # per rank here and communicator: (job node, communicator, world rank)
    ranks = [(j, c, r) for j, c in comms for r in c.members if r // g == j]
    counted = [(j, c, r, name) for j, c, r in ranks for name in COLLECTIVES if c.base.get(name) or c.per_step.get(name)]
    blocks.append(Block(N.RANK_COLLECTIVES, labels(counted, comm=lambda x: hex16(x[1].hash),
                                                   rank=lambda x: str(x[1].members.index(x[2])), gpu=lambda x: str(x[2] % g),
                                                   collective=lambda x: x[3]),
                        per(counted, lambda a, x: x[1].base.get(x[3], 0) + x[1].per_step.get(x[3], 0) * a.entered[x[2]],
                            rank=True)))

    members = {c.hash: np.asarray(c.members) for _, c in comms}
    per_step = {c.hash: sum(c.per_step.values()) for _, c in comms}

    def behind(a: Answer, x) -> float:
        _, c, r = x
        return float(per_step[c.hash] * (a.furthest(c.hash, members[c.hash]) - a.entered[r]))

    blocks.append(Block(N.RANK_BEHIND, labels(ranks, comm=lambda x: hex16(x[1].hash),
                                              rank=lambda x: str(x[1].members.index(x[2])), gpu=lambda x: str(x[2] % g)),
                        per(ranks, behind, rank=True)))
    # missing ranks: named by every node in the world communicator, by its own node in that node's
    gone = sorted({model.rank_of(f.node, f.gpu) for f in rank_hangs(topo) if f.kind != "rank_stopped"}
                  | {model.rank_of(f.node, 0) + i for f in topo.scenario.faults if f.kind == "member_lost"
                     and topo.job_nodes[topo.nodes.index(f.node)] for i in range(g)})
    named = [(j, c, r, code) for j, c in comms for r in gone if r in c.members for code in MISSING_REASONS]
    process = job.processes
    blocks.append(Block(N.MISSING_RANK_INFO, labels(
        named, comm=lambda x: hex16(x[1].hash), rank=lambda x: str(x[1].members.index(x[2])),
        address=lambda x: process[x[2]].host, pid=lambda x: str(process[x[2]].pid), gpu=lambda x: str(x[2] % g),
        reason=lambda x: MISSING_REASONS[x[3]]),
        per(named, lambda a, x: 1.0 if a.status.missing[x[2]] == x[3] else np.nan)))
    return blocks
