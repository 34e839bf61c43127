"""Which catalog series the series frame holds, and how each value derives from a ``State``.

A ``Block`` is one catalog metric over a fixed set of series (static labels); its ``value`` function
returns one number per series in catalog base units, NaN where the series is absent at that tick
(a lost GPU is not reported; an XID series appears with the first event).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from exporters.catalog import analytics as A, fabric as F, gpu as G, power as W, storage as S
from exporters.catalog.model import Metric
from simulator import hardware as hw
from simulator.model import State
from simulator.topology import Topology

REASONS = {"gpu_idle": 0x1, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
           "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40}
LUSTRE = {"mount": "/lustre", "fstype": "lustre", "fsname": "scratch"}
NFS = {"mount": "/home", "fstype": "nfs4", "fsname": "10.0.0.20:/export/home"}


@dataclass(frozen=True)
class Block:
    metric: Metric
    labels: dict[str, np.ndarray]          # label column -> one string per series (incl. "node")
    value: Callable[[State], np.ndarray]

    @property
    def size(self) -> int:
        return len(next(iter(self.labels.values())))


def build_blocks(topo: Topology) -> list[Block]:
    return _gpu_blocks(topo) + _job_blocks(topo) + _port_blocks(topo) + _storage_blocks(topo) + _power_blocks(topo)


def _gpu_labels(topo: Topology, sel: np.ndarray | None = None) -> dict[str, np.ndarray]:
    sel = np.ones(topo.n_gpus, bool) if sel is None else sel
    return {"node": np.array(topo.nodes)[topo.gpu_node][sel], "gpu": topo.gpu_index[sel].astype(str)}


def _gpu_blocks(topo: Topology) -> list[Block]:
    lab = _gpu_labels(topo)
    shown = lambda s, v: np.where(s.lost, np.nan, v)
    per_gpu = [
        (G.UTILIZATION, lambda s: s.gpu["util"] / 100.0), (G.SM_ACTIVE, lambda s: s.gpu["sm_active"]),
        (G.TENSOR_ACTIVE, lambda s: s.gpu["tensor_active"]), (G.SM_CLOCK, lambda s: s.gpu["clock_sm"] * 1e6),
        (G.SM_CLOCK_MAX, lambda s: np.full(len(s.lost), hw.MAX_SM_MHZ * 1e6)),
        (G.POWER, lambda s: s.gpu["power_mw"] / 1000.0),
        (G.POWER_LIMIT, lambda s: np.full(len(s.lost), hw.POWER_LIMIT_W)),
        (G.ENERGY, lambda s: s.energy_mj / 1000.0), (G.TEMPERATURE, lambda s: s.gpu["temp"] * 1.0),
        (G.MEMORY_TEMPERATURE, lambda s: s.gpu["mem_temp"] * 1.0), (G.MEMORY_USED, lambda s: s.gpu["mem_used"] * 1.0),
    ]
    blocks = [Block(G.UP, lab, lambda s: (~s.lost) * 1.0)]
    blocks += [Block(m, lab, (lambda f: lambda s: shown(s, f(s)))(f)) for m, f in per_gpu]
    for reason, bit in REASONS.items():
        blocks.append(Block(G.CLOCK_EVENT, {**lab, "reason": np.full(topo.n_gpus, reason)},
                            (lambda b: lambda s: shown(s, (s.gpu["reasons"] & b) > 0))(bit)))
    xids = sorted({(topo.flat(f.node, f.gpu), f.code) for f in topo.scenario.faults if f.kind == "xid"})
    if xids:
        flat = np.array([g for g, _ in xids])
        labels = {"node": lab["node"][flat], "gpu": lab["gpu"][flat], "xid": np.array([str(x) for _, x in xids])}
        blocks.append(Block(G.XID_ERRORS, labels, lambda s: _xid_counts(s, xids)))
    return blocks


def _xid_counts(s: State, xids: list[tuple[int, int]]) -> np.ndarray:
    counts = np.array([sum(1 for e in s.xid_events if (e[1], e[2]) == key) for key in xids], float)
    return np.where(counts > 0, counts, np.nan)


def _job_blocks(topo: Topology) -> list[Block]:
    sel = topo.job_gpus
    lab = _gpu_labels(topo, sel)
    n, job = int(sel.sum()), topo.scenario.job.job_id
    info = {**lab, "uuid": topo.identity["uuid"][sel], "job_id": np.full(n, job), "user": np.full(n, "sim")}
    ranks = {**lab, "job_id": np.full(n, job), "rank": np.arange(n).astype(str)}
    return [Block(G.JOB_INFO, info, lambda s: np.where(s.lost[sel], np.nan, 1.0)),
            Block(A.RANK_STEP_SECONDS, ranks, lambda s: np.where(s.lost[sel], np.nan, np.round(s.rank_busy_s, 4)))]


def _port_blocks(topo: Topology) -> list[Block]:
    n = topo.n_gpus
    lab = {"node": np.array(topo.nodes)[topo.gpu_node], "device": np.array([topo.hca(g) for g in topo.gpu_index]),
           "port": np.full(n, "1")}
    counters = [(F.IB_TRANSMIT_BYTES, "port_xmit_data", 4), (F.IB_RECEIVE_BYTES, "port_rcv_data", 4),
                (F.IB_TRANSMIT_PACKETS, "port_xmit_packets", 1), (F.IB_RECEIVE_PACKETS, "port_rcv_packets", 1),
                (F.IB_TRANSMIT_WAIT, "port_xmit_wait", 1), (F.IB_SYMBOL_ERRORS, "symbol_error", 1),
                (F.IB_LINK_DOWNED, "link_downed", 1), (F.IB_LINK_ERROR_RECOVERY, "link_error_recovery", 1),
                (F.IB_RECEIVE_ERRORS, "port_rcv_errors", 1), (F.IB_TRANSMIT_DISCARDS, "port_xmit_discards", 1),
                (F.ROCE_ECN_MARKED, "np_ecn_marked_roce_packets", 1), (F.ROCE_CNP_SENT, "np_cnp_sent", 1),
                (F.ROCE_CNP_HANDLED, "rp_cnp_handled", 1), (F.ROCE_OUT_OF_SEQUENCE, "out_of_sequence", 1),
                (F.ROCE_LOCAL_ACK_TIMEOUT, "local_ack_timeout_err", 1)]
    blocks = [Block(m, lab, (lambda name, scale: lambda s: s.port[name] * float(scale))(name, scale))
              for m, name, scale in counters]
    blocks.append(Block(F.IB_STATE, lab, lambda s: np.where(s.port_down, 1.0, 4.0)))
    blocks.append(Block(F.IB_RATE, lab, lambda s: np.full(n, hw.LINK_RATE_BPS)))
    nodes = np.array(topo.nodes)[topo.gpu_node]
    ifaces = np.array([topo.iface(g) for g in topo.gpu_index])
    for pi, prio in enumerate(topo.pfc_priorities):
        for d in ("rx", "tx"):
            plab = {"node": nodes, "interface": ifaces, "priority": np.full(n, str(prio)), "direction": np.full(n, d)}
            blocks.append(Block(F.PFC_PAUSE_FRAMES, plab, (lambda k, i: lambda s: s.pfc[k][:, i] * 1.0)(f"{d}_pause", pi)))
            blocks.append(Block(F.PFC_PAUSE_DURATION, plab,
                                (lambda k, i: lambda s: s.pfc[k][:, i] / 1e6)(f"{d}_pause_duration", pi)))
    for level in ("warning", "error"):
        blocks.append(Block(F.PFC_STORM_EVENTS, {"node": nodes, "interface": ifaces, "level": np.full(n, level)},
                            (lambda lv: lambda s: s.storm[lv] * 1.0)(level)))
    return blocks


def _storage_blocks(topo: Topology) -> list[Block]:
    nn, nodes = len(topo.nodes), np.array(topo.nodes)
    blocks = []
    for prefix, mount, ops in (("lustre", LUSTRE, ("open", "close", "getattr", "statfs")),
                               ("nfs", NFS, ("open", "close", "getattr", "access"))):
        lab = {"node": nodes, **{k: np.full(nn, v) for k, v in mount.items()}}
        blocks.append(Block(S.READ_BYTES, lab, (lambda p: lambda s: s.storage[f"{p}_read_bytes"] * 1.0)(prefix)))
        blocks.append(Block(S.WRITE_BYTES, lab, (lambda p: lambda s: s.storage[f"{p}_write_bytes"] * 1.0)(prefix)))
        for op in ops:
            key = f"{prefix}_{op if prefix == 'lustre' else op.upper()}"
            blocks.append(Block(S.METADATA_OPS, {**lab, "op": np.full(nn, op)},
                                (lambda k: lambda s: s.storage[k] * 1.0)(key)))
    return blocks


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
