"""What the scenario's faults and checkpoints do during one sample interval (t - P, t].

Effects are time-weighted over the interval, so a fault that starts mid-interval shows partly;
a tick at ``t = start_s`` reports the interval before the fault, the next tick the fault.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lockstep.exporters.catalog.enums import POWER_CAP_REASON, THERMAL_REASONS, reason_bits
from lockstep.simulator import hardware as hw
from lockstep.simulator.scenario import INSTANT_KINDS, RANK_HANG_KINDS, Fault
from lockstep.simulator.topology import Topology

THERMAL_BITS = reason_bits(THERMAL_REASONS)
POWER_BITS = reason_bits((POWER_CAP_REASON,))
# What NVML reports of a broken GPU: the hardware slowdown with its heat, or with the power brake asserted.
DEFECT_BITS = {"thermal": reason_bits(("hw_slowdown", *THERMAL_REASONS)),
               "power_brake": reason_bits(("hw_slowdown", "hw_power_brake_slowdown")), "pcie": 0}


# XID the driver logs with an instant fault: a double-bit error (48), a row remapped (63, effective at
# the next GPU reset) or a remap that failed (64).
XID_OF = {"ecc_error": lambda f: 48, "row_remap": lambda f: 63 if f.outcome == "pending" else 64,
          "xid": lambda f: f.code}


def fault_xid(f: Fault) -> int | None:
    """The XID an instant fault raises, None for the others."""
    return XID_OF[f.kind](f) if f.kind in XID_OF else None


def overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def flap_downs(f: Fault) -> list[tuple[float, float]]:
    """Down periods of a link_flap: ``flaps`` evenly spread drops of up to FLAP_DOWN_S each."""
    gap = (f.end_s - f.start_s) / f.flaps
    down = min(hw.FLAP_DOWN_S, gap / 2)
    return [(f.start_s + (j + 0.5) * gap - down / 2, f.start_s + (j + 0.5) * gap + down / 2) for j in range(f.flaps)]


def drift_at(f: Fault, t: float) -> float:
    """A drift's slowdown at ``t``: from 1 at its start, linearly, to ``slowdown`` at its end."""
    return 1 + (f.slowdown - 1) * min(max((t - f.start_s) / (f.end_s - f.start_s), 0.0), 1.0)


def checkpoint_windows(topo: Topology, lo: float, hi: float) -> list[tuple[float, float]]:
    ck = topo.scenario.job.checkpoint
    if ck is None:
        return []
    first = max(1, math.floor(lo / ck.every_s))
    return [(m * ck.every_s, m * ck.every_s + ck.blocking_s)
            for m in range(first, math.floor(hi / ck.every_s) + 1)]


@dataclass
class Conditions:
    """Fault effects for one interval; arrays are per GPU (= per rail port / NIC) or per node."""

    clock_factor: np.ndarray       # per GPU, time-weighted speed of its clock
    reasons: np.ndarray            # per GPU, NVML clock-event bits active during the interval
    power_capped: np.ndarray       # per GPU, bool
    thermal: np.ndarray            # per GPU, bool
    slowdown: np.ndarray           # per node, time-weighted
    rank_slowdown: np.ndarray      # per GPU, time-weighted (slow_rank, drift): compute slower, clock as usual
    rail_throughput: float         # all-reduce throughput factor (a paused rail slows every ring)
    storm_s: np.ndarray            # per NIC, seconds of pause storm in the interval
    storm_priority: np.ndarray     # per NIC, the storming priority (or -1)
    flap_events: np.ndarray        # per port, link drops in the interval
    flap_s: np.ndarray             # per port, seconds down or flapping in the interval
    port_down: np.ndarray          # per port, bool: down at the sample instant
    ckpt_s: float
    hang_s: float
    net_down_s: float              # job blocked because a rail in its rings is down
    read_cap: float | None         # aggregate read bytes/s cap, None if uncapped
    read_cap_share: float          # fraction of the interval under the cap
    member_s: float = 0.0          # job blocked waiting for a member that is gone (member_lost)
    idle_s: float = 0.0            # the job's processes gone, its GPUs idle but still allocated (restart)
    lanes: np.ndarray | None = None        # per GPU, PCIe lanes trained (gpu_defect pcie)
    hot: np.ndarray | None = None          # per GPU, bool: running at its slowdown temperature (gpu_defect thermal)
    pause_share: np.ndarray | None = None  # per NIC, share of the interval paused by PFC (fabric_congestion)
    cap: str = ""                  # a cluster-wide cap holding every GPU's clock: "power" or "thermal" (power_cap)
    cap_share: float = 0.0         # ...for this share of the interval
    stopped_s: float = 0.0         # job blocked waiting for a rank that stopped entering collectives
    dead_s: float = 0.0            # job blocked waiting for a rank whose process is gone (rank_died, peer_dead)
    out: np.ndarray | None = None  # per GPU: share of the interval its process is out of the job's collectives
    rail_bytes: np.ndarray | None = None  # per port: its bytes against its usual share (rail_skew)
    host: np.ndarray | None = None  # per GPU, time-weighted (host_slow): the rank's step slower, its GPU's work as usual


def conditions(topo: Topology, t: float) -> Conditions:
    period = topo.scenario.sample_period_s
    lo = t - period
    n = topo.n_gpus
    c = Conditions(np.ones(n), np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, bool),
                   np.ones(len(topo.nodes)), np.ones(n), 1.0, np.zeros(n), np.full(n, -1), np.zeros(n, np.int64),
                   np.zeros(n), np.zeros(n, bool), 0.0, 0.0, 0.0, None, 0.0)
    c.lanes, c.hot, c.pause_share, c.host = np.full(n, 16), np.zeros(n, bool), np.zeros(n), np.ones(n)
    c.ckpt_s = sum(overlap(a, b, lo, t) for a, b in checkpoint_windows(topo, lo, t))
    downs: list[tuple[float, float]] = []
    for f in topo.faults:
        # a GPU broken when the job starts was broken before it: its first sample shows the defect too
        o = overlap(-math.inf if f.kind == "gpu_defect" and f.start_s <= 0 else f.start_s, f.end_s, lo, t)
        if f.kind in INSTANT_KINDS or (o <= 0 and f.kind != "link_flap"):
            continue
        _apply(c, topo, f, o / period, o, lo, t, downs)
    c.net_down_s = _union_length(downs, lo, t)
    c.hang_s = min(c.hang_s, period)
    c.member_s = min(c.member_s, period)
    c.idle_s = min(c.idle_s, period)
    return c


def rank_hangs(topo: Topology) -> list[Fault]:
    """The scenario's rank hangs on the job's nodes (a rank off the job hangs nothing)."""
    return [f for f in topo.scenario.faults if f.kind in RANK_HANG_KINDS and topo.job_nodes[topo.nodes.index(f.node)]]


def blocked_at(topo: Topology, t: float) -> bool:
    """The job stands still at simulated time ``t``: a checkpoint, a hang, a member or a rank it waits for."""
    spans = checkpoint_windows(topo, t, t) + [(f.start_s, f.end_s) for f in topo.scenario.faults
                                              if f.kind in ("hang", "member_lost", *RANK_HANG_KINDS)]
    return any(a <= t < b for a, b in spans)


def members_gone(topo: Topology, t: float) -> set[str]:
    """Job nodes whose member is gone at simulated time ``t`` (its pod deleted, its node agent dead), to
    the sample that closes the fault's last interval."""
    return {f.node for f in topo.scenario.faults if f.kind == "member_lost" and f.start_s <= t <= f.end_s
            and topo.job_nodes[topo.nodes.index(f.node)]}


def _apply(c: Conditions, topo: Topology, f: Fault, share: float, o: float, lo: float, t: float,
           downs: list[tuple[float, float]]) -> None:
    if f.kind == "gpu_throttle":
        g = topo.flat(f.node, f.gpu)
        c.clock_factor[g] *= 1 - (1 - f.clock_factor) * share
        c.reasons[g] |= THERMAL_BITS if f.reason == "thermal" else POWER_BITS
        (c.thermal if f.reason == "thermal" else c.power_capped)[g] = True
    elif f.kind == "slow_node":
        c.slowdown[topo.nodes.index(f.node)] *= 1 + (f.slowdown - 1) * share
    elif f.kind == "slow_rank":
        c.rank_slowdown[topo.flat(f.node, f.gpu)] *= 1 + (f.slowdown - 1) * share
    elif f.kind == "host_slow":       # the CPU, the data loader or the NIC hands the GPU its work late
        c.host[topo.flat(f.node, f.gpu)] *= 1 + (f.slowdown - 1) * share
    elif f.kind == "drift":
        c.rank_slowdown[topo.flat(f.node, f.gpu)] *= 1 + (drift_at(f, (max(lo, f.start_s) + min(t, f.end_s)) / 2) - 1) * share
    elif f.kind == "pause_storm":
        g = topo.flat(f.node, f.nic)
        c.storm_s[g] += o
        c.storm_priority[g] = f.priority
        if topo.job_nodes[topo.nodes.index(f.node)]:
            c.rail_throughput = min(c.rail_throughput, 1 - (1 - hw.STORM_THROUGHPUT) * share)
    elif f.kind == "link_flap":
        g = topo.flat(f.node, f.nic)
        for a, b in flap_downs(f):
            c.flap_events[g] += lo < a <= t
            c.flap_s[g] += overlap(a, b, lo, t)
            c.port_down[g] |= a <= t < b
            if topo.job_nodes[topo.nodes.index(f.node)]:
                downs.append((a, b))
    elif f.kind == "rail_skew":
        if c.rail_bytes is None:
            c.rail_bytes = np.ones(topo.n_gpus)
        on_rail = np.arange(topo.n_gpus) % topo.gpus_per_node == f.nic
        c.rail_bytes[on_rail] *= 1 + (f.share - 1) * share
    elif f.kind == "storage_starvation":
        c.read_cap = f.read_cap_bytes_per_s if c.read_cap is None else min(c.read_cap, f.read_cap_bytes_per_s)
        c.read_cap_share = max(c.read_cap_share, share)
    elif f.kind == "hang":
        c.hang_s += o
    elif f.kind == "member_lost" and topo.job_nodes[topo.nodes.index(f.node)]:
        c.member_s = max(c.member_s, o)   # one lost member blocks the job as much as several
    elif f.kind == "gpu_defect":
        g = topo.flat(f.node, f.gpu)
        if f.defect == "pcie":            # host transfers over half the lanes: the rank's steps take longer
            c.rank_slowdown[g] *= 1 + (f.slowdown - 1) * share
            c.lanes[g] = f.lanes
        else:
            c.clock_factor[g] *= 1 - (1 - f.clock_factor) * share
            c.hot[g] |= f.defect == "thermal"
        c.reasons[g] |= DEFECT_BITS[f.defect]
    elif f.kind == "fabric_congestion":
        # every ring slows; the switches pause the job's NICs on the lossless class
        c.rail_throughput = min(c.rail_throughput, 1 - (1 - f.throughput) * share)
        c.pause_share = np.where(topo.job_gpus, np.maximum(c.pause_share, f.pause_share * share), c.pause_share)
    elif f.kind == "power_cap":
        c.clock_factor *= 1 - (1 - f.clock_factor) * share
        c.cap, c.cap_share = f.reason, max(c.cap_share, share)
    elif f.kind == "restart":
        c.idle_s += o
    elif f.kind in RANK_HANG_KINDS and topo.job_nodes[topo.nodes.index(f.node)]:
        if f.kind == "rank_stopped":
            c.stopped_s = min(max(c.stopped_s, o), topo.scenario.sample_period_s)
        else:
            c.dead_s = min(max(c.dead_s, o), topo.scenario.sample_period_s)
        if c.out is None:
            c.out = np.zeros(topo.n_gpus)
        g = topo.flat(f.node, f.gpu)
        c.out[g] = max(c.out[g], share)


def _union_length(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    total, end = 0.0, lo
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total
