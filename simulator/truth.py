"""Ground truth of a scenario: stragglers, stall intervals with causes, hung ranks, job-wide slowdowns,
GPU-seconds lost by cause and the goodput ledger.

A stall is an interval in which the job makes less than half its nominal progress. Candidate
intervals come from the scenario (lost members, checkpoint windows, hangs, rail drops of a link flap, pause
storms, storage caps, fabric congestion, stragglers), each kept only if its effect alone halves progress; where
they overlap the earlier cause in ``PRIORITY`` owns the time. A job-wide slowdown is a fault that slows
every rank together without halving progress (a storage cap, fabric congestion, a cluster-wide power
cap). Every finding carries the cause the evidence the stack collects can tell (``cause``). Loss and
the ledger are the model's own per-tick accounting (simulator/job.py), summed over the run.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from lockstep.exporters.catalog.enums import (
    CHECKPOINT,
    HANG,
    HARDWARE,
    HOST,
    MEMBER_LOST,
    NETWORK,
    POWER,
    RANK_DEAD,
    RANK_STOPPED,
    STORAGE,
    STRAGGLER,
    TRANSIENT,
    WORK,
    ledger_zero,
)
from lockstep.simulator import hardware as hw
from lockstep.simulator.faults import checkpoint_windows, flap_downs, rank_hangs
from lockstep.simulator.job import CAUSES
from lockstep.simulator.scenario import RANK_HANG_KINDS, Scenario
from lockstep.simulator.signals import LUSTRE
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology

PRIORITY = (MEMBER_LOST, RANK_DEAD, RANK_STOPPED, HANG, CHECKPOINT, NETWORK, STORAGE, STRAGGLER)
# The stall cause of each rank hang: a rank that stopped entering collectives, or one whose process RAS lost.
RANK_CAUSE = {"rank_stopped": RANK_STOPPED, "rank_died": RANK_DEAD, "peer_dead": RANK_DEAD}


class Truth:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.lost = dict.fromkeys(CAUSES, 0.0)
        self.steps = 0.0
        self.imbalance = 0.0
        self.ledger = ledger_zero()
        self.slowed: list[tuple[float, dict[str, float]]] = []    # per tick: GPU-seconds slowed, by cause
        self.writing: list[tuple[float, float]] = []    # per tick: seconds the job wrote its checkpoint

    def observe(self, state: State) -> None:
        before = self.ledger["slowdown"]
        wrote = self.ledger[CHECKPOINT][CHECKPOINT]
        self.lost, self.steps, self.imbalance = dict(state.lost_gpu_s), state.steps, state.imbalance_gpu_s
        self.ledger = {kind: dict(causes) for kind, causes in state.ledger.items()}
        self.slowed.append((state.t, {c: v - before[c] for c, v in self.ledger["slowdown"].items()}))
        n_gpus = len(self.scenario.job.nodes) * self.scenario.cluster.gpus_per_node
        self.writing.append((state.t, (self.ledger[CHECKPOINT][CHECKPOINT] - wrote) / n_gpus))

    def document(self) -> dict:
        sc, job = self.scenario, self.scenario.job
        n_gpus = len(job.nodes) * sc.cluster.gpus_per_node
        run_s = (sc.ticks - 1) * sc.sample_period_s
        return {
            "scenario": sc.name, "seed": sc.seed, "start_timestamp": sc.start_timestamp,
            "sample_period_s": sc.sample_period_s, "duration_s": sc.duration_s,
            "jobs": [{"job_id": job.job_id, "nodes": list(job.nodes), "gpus_per_node": sc.cluster.gpus_per_node,
                      "step_time_s": job.step_time_s}],
            "stragglers": stragglers(sc, Topology(sc).faults), "stalls": stalls(sc), "hangs": hangs(sc),
            "loss": {"job_id": job.job_id, "allocated_gpu_seconds": float(n_gpus * run_s),
                     "lost_gpu_seconds": {c: round(self.lost[c], 3) for c in CAUSES}},
            "steps": round(self.steps, 3), "nominal_steps": round(run_s / job.step_time_s, 3),
            "faults": [_fault_doc(f) for f in Topology(sc).faults],
            "imbalance_gpu_seconds": round(self.imbalance, 3),
            "imbalanced": imbalanced(sc),
            "noise": dataclasses.asdict(sc.noise) if sc.noise.on else "none",
            "slowdowns": slowdowns(sc, self.slowed),
            "ledger": {"job_id": job.job_id, "allocated_gpu_seconds": float(n_gpus * run_s),
                       "gpu_seconds": {kind: {cause: round(v, 3) for cause, v in causes.items()}
                                       for kind, causes in self.ledger.items()}},
            "checkpoints": self.checkpoints(run_s),
        }

    def checkpoints(self, run_s: float) -> list[dict]:
        """Each checkpoint the run holds whole: ``{job_id, start_s, duration_s, bytes, mount, fstype}``, the seconds it
        wrote (what a hang or a lost member left of its window) and the bytes those seconds wrote."""
        sc = self.scenario
        ck, period = sc.job.checkpoint, sc.sample_period_s
        out = []
        for a, b in checkpoint_windows(Topology(sc), 0.0, run_s):
            wrote = sum(s for t, s in self.writing if a < t and t - period < b)
            if b <= run_s and wrote > 0:     # the job checkpoints to the shared Lustre (observe.storage_increments)
                out.append({"job_id": sc.job.job_id, "start_s": a, "duration_s": round(wrote, 3),
                            "bytes": round(ck.write_bytes * wrote / ck.blocking_s), "mount": LUSTRE["mount"],
                            "fstype": LUSTRE["fstype"]})
        return out


# A slowdown the scorers must flag within 60 s of onset (the detection targets): a throttled GPU ≥ 15%
# slower, a node ≥ 12%, a rank ≥ 1.5x for ≥ 30 s; a rank slower for longer with no clock or reason to
# show it (slow_rank, drift: only its pace tells) once ≥ 25%. A milder or shorter one is listed:
# flagging it is no false flag, missing it no miss.
MUST_GPU, MUST_NODE, MUST_TRANSIENT, MUST_TRANSIENT_S, MUST_RANK = 1.15, 1.12, 1.5, 30.0, 1.25
# A job-wide slowdown a scorer must report: every rank ≥ 15% slower (its pace ≤ 0.85 of its baseline) for
# ≥ 2 minutes; a milder or shorter one is listed so that reporting it is no false finding.
MUST_SLOWDOWN, MUST_SLOWDOWN_S = 0.15, 120.0
STRAGGLER_KINDS = ("gpu_throttle", "slow_node", "slow_rank", "drift", "gpu_defect", "host_slow")
# The cause a straggler's evidence shows: its own clock, clock-event reasons, heat or PCIe link (hardware),
# nothing but its pace (a slow node's host, a rank's software: transient), or its step times and collectives'
# arrival while its GPU counters look like its peers' (its CPU, data loader or NIC: host).
STRAGGLER_CAUSE = {"gpu_throttle": HARDWARE, "gpu_defect": HARDWARE, "slow_node": TRANSIENT, "slow_rank": TRANSIENT,
                   "drift": TRANSIENT, "host_slow": HOST}


def stragglers(sc: Scenario, faults: tuple | None = None) -> list[dict]:
    members = set(sc.job.nodes)
    out = []
    for f in faults if faults is not None else sc.faults:
        if f.node not in members or f.kind not in STRAGGLER_KINDS:
            continue
        row = {"job_id": sc.job.job_id, "node": f.node, "gpu": None if f.kind == "slow_node" else str(f.gpu),
               "kind": f.kind, "start_s": f.start_s, "end_s": min(f.end_s, sc.duration_s),
               "cause": STRAGGLER_CAUSE[f.kind]}
        out.append({**row, **_required(f, row["end_s"], _blocked(sc, f.start_s, row["end_s"]))})
    return out


def slowdowns(sc: Scenario, slowed: list[tuple[float, dict[str, float]]]) -> list[dict]:
    """Faults that slow the whole job without halving its progress, with the cause their evidence shows
    and the share of the job's GPU time they took while on, from the model's own ledger (``slowed``: per
    tick, the GPU-seconds lost to a slowdown by cause): the nominal step is not the job's, whose steps
    already wait for the slowest of its jittering ranks."""
    job = sc.job
    c0, m0 = job.step_time_s * hw.COMPUTE_SHARE, job.step_time_s * (1 - hw.COMPUTE_SHARE)
    n_gpus = len(job.nodes) * sc.cluster.gpus_per_node
    out = []
    for f in sc.faults:
        if f.kind == "storage_starvation":
            cause, step = STORAGE, job.storage_read_bytes_per_step / f.read_cap_bytes_per_s
        elif f.kind == "fabric_congestion":
            cause, step = NETWORK, c0 + m0 / f.throughput
        elif f.kind == "power_cap":
            cause, step = POWER, c0 / f.clock_factor + m0
        else:
            continue
        end = min(f.end_s, sc.duration_s)
        if step > 2 * job.step_time_s or end <= f.start_s:       # a stall, not a slowdown
            continue
        lost = sum(v.get(cause, 0.0) for t, v in slowed if f.start_s < t <= end + sc.sample_period_s)
        share = lost / (n_gpus * (end - f.start_s))
        running = end - f.start_s - _blocked(sc, f.start_s, end)
        out.append({"job_id": job.job_id, "start_s": f.start_s, "end_s": end, "cause": cause, "kind": f.kind,
                    "lost_gpu_seconds": round(lost, 1), "share": round(share, 4),
                    "required": share >= MUST_SLOWDOWN and running >= MUST_SLOWDOWN_S})
    return out


def _blocked(sc: Scenario, start: float, end: float) -> float:
    """Seconds of [start, end] the job stands still (checkpoints, hangs, a lost member): no rank's pace
    shows then."""
    spans = checkpoint_windows(Topology(sc), start, end) + [
        (f.start_s, f.end_s) for f in sc.faults if f.kind in ("hang", "member_lost", "restart", *RANK_HANG_KINDS)]
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def hangs(sc: Scenario) -> list[dict]:
    """The ranks the job waits for: each rank hang on the job's nodes with its cause, node, GPU and world rank
    (the job's GPUs in order, as RAS and ``lockstep_rank_step_seconds`` number them)."""
    topo = Topology(sc)
    order = list(np.flatnonzero(topo.job_gpus))
    return [{"job_id": sc.job.job_id, "kind": f.kind, "cause": RANK_CAUSE[f.kind], "node": f.node, "gpu": str(f.gpu),
             "rank": order.index(topo.flat(f.node, f.gpu)), "start_s": f.start_s, "end_s": min(f.end_s, sc.duration_s)}
            for f in rank_hangs(topo)]


def imbalanced(sc: Scenario) -> list[dict]:
    """GPUs of the job in a worker group of the scenario's noise (slower or faster than the rest from
    the start), with their group's speed."""
    topo = Topology(sc)
    speed = topo.draws.group_speed
    return [{"job_id": sc.job.job_id, "node": topo.nodes[g // topo.gpus_per_node], "gpu": str(g % topo.gpus_per_node),
             "speed": float(speed[g]), "cause": WORK} for g in np.flatnonzero(topo.job_gpus & (speed != 1.0))]


def _required(f, end: float, blocked: float) -> dict:
    """Whether the slowdown must be flagged (a transient: for the seconds the job ran, not those a
    checkpoint blocked it), and from when its latency counts (a drift: from the moment it reaches
    the bar)."""
    if f.kind == "gpu_throttle":
        return {"required": 1 / f.clock_factor >= MUST_GPU}
    if f.kind == "gpu_defect":
        return {"required": (f.slowdown if f.defect == "pcie" else 1 / f.clock_factor) >= MUST_GPU}
    if f.kind == "slow_node":
        return {"required": f.slowdown >= MUST_NODE}
    if f.kind in ("slow_rank", "host_slow"):
        seen = end - f.start_s - blocked
        return {"required": seen >= MUST_TRANSIENT_S and f.slowdown >= (MUST_RANK if seen >= 120.0 else MUST_TRANSIENT)}
    reach = f.start_s + (f.end_s - f.start_s) * (MUST_RANK - 1) / (f.slowdown - 1)
    return {"required": f.slowdown >= MUST_RANK and reach <= end - MUST_TRANSIENT_S, "detect_from_s": round(reach, 1)}


def _candidates(sc: Scenario) -> dict[str, list[tuple[float, float]]]:
    job, members = sc.job, set(sc.job.nodes)
    c0 = job.step_time_s * hw.COMPUTE_SHARE
    m0 = job.step_time_s - c0
    def halves(step):
        return step > 2 * job.step_time_s
    out: dict[str, list[tuple[float, float]]] = {c: [] for c in PRIORITY}
    out[CHECKPOINT] = checkpoint_windows(Topology(sc), 0.0, sc.duration_s)
    for f in sc.faults:
        if f.kind == "hang":
            out[HANG].append((f.start_s, f.end_s))
        elif f.kind == "member_lost" and f.node in members:
            out[MEMBER_LOST].append((f.start_s, f.end_s))
        elif f.kind in RANK_HANG_KINDS and f.node in members:
            out[RANK_CAUSE[f.kind]].append((f.start_s, f.end_s))
        elif f.kind == "link_flap" and f.node in members:
            out[NETWORK] += flap_downs(f)
        elif f.kind == "pause_storm" and f.node in members and halves(c0 + m0 / hw.STORM_THROUGHPUT):
            out[NETWORK].append((f.start_s, f.end_s))
        elif f.kind == "storage_starvation" and halves(job.storage_read_bytes_per_step / f.read_cap_bytes_per_s):
            out[STORAGE].append((f.start_s, f.end_s))
        elif f.kind == "fabric_congestion" and halves(c0 + m0 / f.throughput):
            out[NETWORK].append((f.start_s, f.end_s))
        elif f.kind == "gpu_throttle" and f.node in members and halves(c0 / f.clock_factor + m0):
            out[STRAGGLER].append((f.start_s, f.end_s))
        elif f.kind in ("slow_node", "slow_rank", "host_slow") and f.node in members and halves(c0 * f.slowdown + m0):
            out[STRAGGLER].append((f.start_s, f.end_s))
        elif f.kind == "gpu_defect" and f.node in members and halves(
                c0 * (f.slowdown if f.defect == "pcie" else 1 / f.clock_factor) + m0):
            out[STRAGGLER].append((f.start_s, f.end_s))
    return out


def stalls(sc: Scenario) -> list[dict]:
    taken: list[tuple[float, float]] = []
    result = []
    for cause in PRIORITY:
        for a, b in sorted(_candidates(sc)[cause]):
            for lo, hi in _subtract((max(a, 0.0), min(b, sc.duration_s)), taken):
                result.append({"job_id": sc.job.job_id, "start_s": round(lo, 3), "end_s": round(hi, 3), "cause": cause})
            taken.append((a, b))
    return sorted(result, key=lambda s: (s["start_s"], s["cause"]))


def _subtract(span: tuple[float, float], taken: list[tuple[float, float]]) -> list[tuple[float, float]]:
    pieces = [span] if span[1] > span[0] else []
    for a, b in taken:
        pieces = [p for lo, hi in pieces for p in ((lo, min(hi, a)), (max(lo, b), hi)) if p[1] > p[0]]
    return pieces


def _fault_key(kind: str, key: str) -> str:
    """The scenario file's name of a fault field: ``hca`` of a link fault and ``rail`` of a rail_skew are ``nic``."""
    if key != "nic":
        return key
    return {"link_flap": "hca", "link_degraded": "hca", "rail_skew": "rail"}.get(kind, key)


def _fault_doc(f) -> dict:
    doc = {k: v for k, v in dataclasses.asdict(f).items() if v is not None}
    instant = {"xid": ("code",), "ecc_error": ("count",), "row_remap": ("outcome",)}
    if f.kind in instant:
        return {"kind": f.kind, "node": f.node, "gpu": f.gpu, "at_s": f.start_s, **{k: doc[k] for k in instant[f.kind]}}
    keep = {"gpu_throttle": ("node", "gpu", "clock_factor", "reason"), "slow_node": ("node", "slowdown"),
            "slow_rank": ("node", "gpu", "slowdown"), "host_slow": ("node", "gpu", "slowdown", "source"),
            "drift": ("node", "gpu", "slowdown"),
            "pause_storm": ("node", "nic", "priority"), "link_flap": ("node", "nic", "flaps"),
            "storage_starvation": ("read_cap_bytes_per_s",), "hang": (), "gpu_missing": ("node", "gpu"),
            "link_degraded": ("node", "nic", "rate_factor"), "member_lost": ("node",),
            "gpu_defect": ("node", "gpu", "defect", *(("lanes", "slowdown") if f.defect == "pcie" else ("clock_factor",))),
            "fabric_congestion": ("throughput", "pause_share"), "power_cap": ("clock_factor", "reason"), "restart": (),
            "rail_skew": ("nic", "share"),
            **dict.fromkeys(RANK_HANG_KINDS, ("node", "gpu"))}[f.kind]
    named = {_fault_key(f.kind, k): doc[k] for k in keep}
    return {"kind": f.kind, **named, "start_s": f.start_s, "end_s": f.end_s}
