"""The synchronous data-parallel job during one interval: step time, how each rank spent its
time, and the GPU-seconds lost by cause.

Each step every rank computes (C0 scaled by its clock factor and its node's slowdown), then all
ranks all-reduce (M0, slower when a rail's throughput collapses); the step ends when the slowest
rank is done, and data loading (overlapped with compute) can hold it back when storage is capped.

Loss accounting (GPU-seconds, per job GPU, summed): blocked time counts whole (a member lost,
checkpoint, hang, network while a rail is down); during running time a rank loses ``tau * d / T`` per cause, where
``T`` is the actual step time and ``d`` that cause's share of ``T - T0``:
- throttle: the extra compute time of a throttled GPU itself (``c_g - C0``);
- straggler: time a rank waits for a slower peer (``max c - c_g``), and a slow node's own slowdown;
- network: ``M - M0``; storage: data-loading time beyond the step (``T - max c - M``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exporters.catalog.enums import CHECKPOINT, HANG, LOSS_CAUSES, MEMBER_LOST, NETWORK, STORAGE, STRAGGLER, THROTTLE
from simulator import hardware as hw
from simulator.faults import Conditions
from simulator.topology import Topology

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


def job_tick(topo: Topology, c: Conditions) -> JobTick:
    job, period = topo.scenario.job, topo.scenario.sample_period_s
    sel = topo.job_gpus
    c0 = job.step_time_s * hw.COMPUTE_SHARE
    m0 = job.step_time_s - c0
    factor = c.clock_factor[sel] / c.slowdown[topo.gpu_node[sel]]
    comp = c0 / factor
    own_throttle = np.where(c.clock_factor[sel] < 1, c0 / c.clock_factor[sel] - c0, 0.0)
    maxc = float(comp.max())
    m = m0 / c.rail_throughput
    read_s = 0.0
    if c.read_cap is not None and job.storage_read_bytes_per_step > 0:
        read_s = c.read_cap_share * job.storage_read_bytes_per_step / c.read_cap
    step = max(maxc + m, read_s)
    member = min(c.member_s, period)        # the rest wait in the collective for a member that is gone
    hang = min(c.hang_s, period - member)
    ckpt = min(c.ckpt_s, period - member - hang)
    down = min(c.net_down_s, period - member - hang - ckpt)
    tau = period - member - hang - ckpt - down
    steps = tau / step
    n = int(sel.sum())
    io = step - maxc - m
    lost = {
        MEMBER_LOST: n * member, HANG: n * hang, CHECKPOINT: n * ckpt,
        NETWORK: n * down + n * tau * (m - m0) / step,
        STORAGE: n * tau * io / step,
        THROTTLE: float(own_throttle.sum()) * tau / step,
        STRAGGLER: float((maxc - c0) * n - own_throttle.sum()) * tau / step,
    }
    frac = steps / period
    return JobTick(
        steps=steps, step_s=step, compute=comp * frac, comm=np.full(n, m * frac),
        spin=(maxc - comp) * frac + (member + hang + down) / period, io_wait=np.full(n, io * frac),
        ckpt=ckpt / period, rank_busy_s=comp + m, lost=lost,
        read_bytes=steps * job.storage_read_bytes_per_step)
