"""The synchronous data-parallel job during one interval: step time, how each rank spent its
time, and the GPU-seconds lost by cause.

Each step every rank computes (C0 scaled by its clock factor and its node's slowdown), then all
ranks all-reduce (M0, slower when a rail's throughput collapses); the step ends when the slowest
rank is done, and data loading (overlapped with compute) can hold it back when storage is capped.

Loss accounting (GPU-seconds, per job GPU, summed): blocked time counts whole (a member lost, a rank
dead or stopped, checkpoint, hang, network while a rail is down); during running time a rank loses
``tau * d / T`` per cause, where ``T`` is the actual step time and ``d`` that cause's share of ``T - T0``:
- throttle: the extra compute time of a throttled GPU itself (``c_g - C0``); under a cluster-wide cap
  every rank's share of the steps' slowing (nobody waits for a straggler then);
- straggler: time a rank waits for a slower peer (``max c - c_g``), and a slow node's own slowdown;
- network: ``M - M0``; storage: data-loading time beyond the step (``T - max c - M``).

The goodput ledger (``JobTick.ledger``) splits the same interval by finding: every GPU-second is
productive or lost to exactly one (kind, cause) of ``lockstep.exporters.catalog.enums.LEDGER``. A
cause's running loss is a stall's when the fault alone at least doubles the step (as the truth's
stalls), else a job-wide slowdown's; the slowest rank's extra compute splits into what every rank
shares (a cluster-wide cap: a slowdown) and the rest (a straggler, hardware when its own clock or
link is at fault, else transient); the ranks' waiting that a worker group adds to their jitter's (a
slower group's peers wait for it, a faster group waits for the rest) is imbalance (work). A restart
leaves the GPUs allocated and idle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lockstep.exporters.catalog.enums import (
    CHECKPOINT,
    HANG,
    HARDWARE,
    HOST,
    LOSS_CAUSES,
    MEMBER_LOST,
    NETWORK,
    POWER,
    RANK_DEAD,
    RANK_STOPPED,
    STORAGE,
    STRAGGLER,
    THROTTLE,
    TRANSIENT,
    WORK,
    ledger_zero,
)
from lockstep.simulator import hardware as hw
from lockstep.simulator.faults import Conditions
from lockstep.simulator.topology import Topology

CAUSES = LOSS_CAUSES


@dataclass
class JobTick:
    steps: float                 # steps completed in the interval
    step_s: float                # actual step time while running (inf when fully blocked)
    compute: np.ndarray          # per job GPU: fraction of the interval computing
    comm: np.ndarray             # ... in the all-reduce
    spin: np.ndarray             # ... in an NCCL kernel waiting (slow peer, hang, rail down)
    io_wait: np.ndarray          # ... idle waiting for input data
    ckpt: float                  # fraction blocked writing a checkpoint
    rank_busy_s: np.ndarray      # per job GPU: compute + all-reduce time of one step
    lost: dict[str, float]       # GPU-seconds lost per cause in the interval
    read_bytes: float            # job-wide bytes read from storage
    imbalance: float = 0.0       # GPU-seconds ranks waited for the static spread and jitter (no cause)
    ledger: dict[str, dict[str, float]] | None = None   # kind -> cause -> GPU-seconds (productive included)
    comm_s: float = 0.0          # the all-reduce's own time per step (M: M0, longer on a degraded rail)
    wait_s: np.ndarray | None = None   # per job GPU: mean seconds per step it waited in the all-reduce for the last rank


def sub_steps(job, period: float, jitter: float) -> int:
    """Steps simulated one by one per interval when ranks jitter (each waits for that step's slowest)."""
    return 1 if not jitter else int(np.clip(round(period / job.step_time_s), 1, 4))


def job_tick(topo: Topology, c: Conditions, noisy: np.random.Generator) -> JobTick:
    """``noisy``: the tick's own stream for the scenario's noise (the ranks' step jitter)."""
    job, period = topo.scenario.job, topo.scenario.sample_period_s
    sel = topo.job_gpus
    n = int(sel.sum())
    c0 = job.step_time_s * hw.COMPUTE_SHARE
    m0 = job.step_time_s - c0
    factor = c.clock_factor[sel] / c.slowdown[topo.gpu_node[sel]] / c.rank_slowdown[sel]
    base = c0 / topo.draws.speed[sel]            # c0 exactly under noise: none (speed 1)
    jitter = topo.draws.jitter
    k = sub_steps(job, period, jitter)
    eps = 1.0 + jitter * noisy.standard_normal((k, n)) if jitter else np.ones((1, n))
    steps_c = base / factor * eps                   # per sub-step, per rank compute time
    # a slow host (host_slow) makes the rank ready late; its GPU computes as long as ever and waits the rest
    # of the step as its peers do, so its counters look like theirs
    host = c.host[sel] if c.host is not None else np.ones(n)
    ready = steps_c * host
    comp = steps_c.mean(axis=0)
    own_throttle = np.where(c.clock_factor[sel] < 1, base * eps.mean(axis=0) / c.clock_factor[sel]
                            - base * eps.mean(axis=0), 0.0)
    maxc = float(ready.max(axis=1).mean())
    calm = base * eps                                # the same steps without any fault
    maxc_calm = float(calm.max(axis=1).mean())
    m = m0 / c.rail_throughput
    read_s = 0.0
    if c.read_cap is not None and job.storage_read_bytes_per_step > 0:
        read_s = c.read_cap_share * job.storage_read_bytes_per_step / c.read_cap
    step = max(maxc + m, read_s)
    member = min(c.member_s, period)        # the rest wait in the collective for a member that is gone
    dead = min(c.dead_s, period - member)   # ... for a rank whose process is gone
    stopped = min(c.stopped_s, period - member - dead)   # ... for a rank that stopped entering collectives
    hang = min(c.hang_s, period - member - dead - stopped)
    idle = min(c.idle_s, period - member - dead - stopped - hang)
    ckpt = min(c.ckpt_s, period - member - dead - stopped - hang - idle)
    down = min(c.net_down_s, period - member - dead - stopped - hang - idle - ckpt)
    tau = period - member - dead - stopped - hang - idle - ckpt - down
    steps = tau / step
    io = step - maxc - m
    split = _split_compute(topo, c, base, eps, factor / host, maxc, maxc_calm)
    if c.cap:      # a cap every rank shares slows the steps as a whole: throttle, nobody's straggler
        own_throttle = np.where(c.clock_factor[sel] < c.clock_factor[sel].max(), base * eps.mean(axis=0) * (
            1 / c.clock_factor[sel] - 1 / c.clock_factor[sel].max()), 0.0) + split["shared"]
    lost = {
        MEMBER_LOST: n * member, RANK_DEAD: n * dead, RANK_STOPPED: n * stopped, HANG: n * hang, CHECKPOINT: n * ckpt,
        NETWORK: n * down + n * tau * (m - m0) / step,
        STORAGE: n * tau * io / step,
        THROTTLE: float(own_throttle.sum()) * tau / step,
        STRAGGLER: float((maxc - maxc_calm) * n - own_throttle.sum()) * tau / step,
    }
    frac = steps / period
    blocked = {"member": member, "dead": dead, "stopped": stopped, "hang": hang, "idle": idle, "ckpt": ckpt,
               "down": down}
    # the ranks waiting on a hung rank spin in NCCL; the hung rank's own process is out of it (its GPU idles)
    out = c.out[sel] if c.out is not None else 0.0
    return JobTick(
        steps=steps, step_s=step, compute=comp * frac, comm=np.full(n, m * frac),
        spin=(maxc - comp) * frac + (member + hang + down + (dead + stopped) * (1 - out)) / period,
        io_wait=np.full(n, io * frac),
        ckpt=ckpt / period, rank_busy_s=ready[-1] + m, lost=lost,
        read_bytes=steps * job.storage_read_bytes_per_step,
        imbalance=float(maxc_calm * n - calm.mean(axis=0).sum()) * tau / step, comm_s=m,
        wait_s=(ready.max(axis=1, keepdims=True) - ready).mean(axis=0),
        ledger=_ledger(topo, c, n, period, blocked, tau / step,
                       {"step": step, "maxc": maxc, "calm": maxc_calm, "m": m, "m0": m0, "io": io, "read": read_s},
                       split))


def _split_compute(topo: Topology, c: Conditions, base: np.ndarray, eps: np.ndarray, factor: np.ndarray,
                   maxc: float, calm: float) -> dict:
    """The slowest rank's compute beyond the calm steps' (seconds per step), split: what a factor
    every rank shares costs (a cluster-wide cap), what a worker group costs, and the rest, by the
    cause of the rank that sets the pace (its own clock or link: hardware; else transient)."""
    sel = topo.job_gpus
    common = float(factor.max())                       # the least slowed rank's factor: every rank has it
    shared = float((base / common * eps).max(axis=1).mean())
    slowest = int(np.argmin(factor))
    own = bool(c.clock_factor[sel][slowest] < c.clock_factor[sel].max() or c.lanes[sel][slowest] < 16)
    host = c.host is not None and bool(c.host[sel][slowest] > 1)
    return {"shared": max(shared - calm, 0.0), "rank": max(maxc - max(shared, calm), 0.0),
            "rank_cause": HARDWARE if own else HOST if host else TRANSIENT,
            "groups": max(_waiting(base * eps) - _waiting(base * topo.draws.group_speed[sel] * eps), 0.0)}


def _waiting(compute: np.ndarray) -> float:
    """Seconds per step a rank waits for the slowest, on average (sub-steps × ranks of compute times)."""
    return float((compute.max(axis=1, keepdims=True) - compute).mean())


def _ledger(topo: Topology, c: Conditions, n: int, period: float, blocked: dict[str, float], share: float,
            t: dict[str, float], compute: dict) -> dict[str, dict[str, float]]:
    """GPU-seconds of the interval by (kind, cause) (module docstring); ``share``: running time per step.
    A cause's running loss is a stall's where its effect alone at least doubles the step."""
    nominal = topo.scenario.job.step_time_s
    c0 = nominal * hw.COMPUTE_SHARE
    out = ledger_zero()
    out["stall"][MEMBER_LOST] = n * blocked["member"]
    out["stall"][RANK_DEAD] = n * blocked["dead"]
    out["stall"][RANK_STOPPED] = n * blocked["stopped"]
    out["stall"][HANG] = n * blocked["hang"]
    out["idle"][""] = n * blocked["idle"]
    out[CHECKPOINT][CHECKPOINT] = n * blocked["ckpt"]
    out["stall"][NETWORK] = n * blocked["down"]
    out["stall" if c0 + t["m"] > 2 * nominal else "slowdown"][NETWORK] += n * share * (t["m"] - t["m0"])
    out["stall" if t["read"] > 2 * nominal else "slowdown"][STORAGE] += n * share * t["io"]
    out["slowdown"][POWER] += n * share * compute["shared"]
    if t["maxc"] + t["m0"] > 2 * nominal:
        out["stall"][STRAGGLER] += n * share * compute["rank"]
    else:
        out["straggler"][compute["rank_cause"]] += n * share * compute["rank"]
    out["imbalance"][WORK] = n * share * compute["groups"]
    out["productive"][""] = n * period - sum(v for kind in out.values() for v in kind.values())
    return out
