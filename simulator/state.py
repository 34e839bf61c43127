"""The simulated cluster at one tick, in the units each real source reports: what ``model`` produces and
``signals`` maps to file fields and catalog metrics."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lockstep.exporters.catalog.enums import ledger_zero
from lockstep.simulator.job import CAUSES


@dataclass
class State:
    k: int
    t: float
    timestamp: float
    gpu: dict[str, np.ndarray]            # NVML units: util %, MHz, mW, C, bytes, bitmask
    energy_mj: np.ndarray                 # per GPU, since driver load
    lost: np.ndarray                      # per GPU: fell off the bus (XID 79)
    xid_events: list[tuple[int, int, int, float]]   # (seq, flat gpu, xid, timestamp)
    memory: dict[str, np.ndarray]         # per GPU: ecc_uncorrected, remap_uncorrectable, remap_pending, remap_failed
    missing: np.ndarray                   # per GPU: not enumerated by NVML (gpu_missing)
    port: dict[str, np.ndarray]           # per rail port: sysfs counter name -> int64
    port_down: np.ndarray
    pfc: dict[str, np.ndarray]            # per NIC x priority: rx/tx pause frames, duration (us)
    storm: dict[str, np.ndarray]          # per NIC: warning / error events, seconds storming
    storage: dict[str, np.ndarray]        # per node: counter name -> int64
    power: dict[str, np.ndarray]          # chassis_w/_j per node, pdu_w/_j per rack (W, J)
    coolant: dict[str, float]             # supply_c, return_c, flow_lpm, heat_w
    rank_busy_s: np.ndarray               # per job GPU
    steps: float                          # job steps since start
    lost_gpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    imbalance_gpu_s: float = 0.0          # waiting for the static spread and jitter (noise; no cause)
    ledger: dict[str, dict[str, float]] = field(default_factory=ledger_zero)   # the goodput ledger, job.py
    step_history: list[tuple[float, float]] = field(default_factory=list)   # (t, steps) of the last few ticks
    comm_s: float = 0.0                   # the all-reduce's own time per step (rank_busy_s minus it: compute)
    # NCCL Inspector's dumps (simulator/inspector.py): each job rank's wait in the all-reduce per step, summed over
    # the running ticks since the last dump, and as of the last dump (the mean per step; NaN before the first)
    wait_sum: np.ndarray | None = None
    wait_ticks: int = 0
    dump_wait_s: np.ndarray | None = None
    dump_comm_s: float = 0.0
    dumps: int = 0
