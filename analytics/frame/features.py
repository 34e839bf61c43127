"""Per-GPU feature matrices: what every scorer reads.

Each signal is one matrix: rows are sample times, columns are ``(job_id, node, gpu)``; node-wide
signals (storage, PFC) are repeated on every GPU column of the node so that all matrices share one
shape. Both sources reach them through the same code: the service's answers to the inputs' queries
(``lockstep.analytics.frame.inputs``, ``lockstep.analytics.prom.decode``) and a simulator frame's answers
computed as Prometheus would (``lockstep.analytics.evaluation.simframe``) are placed by
``lockstep.analytics.frame.window``; everything downstream is shared.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

REASON_PREFIX = "reason:"    # signals[REASON_PREFIX + reason]: 1 while the GPU holds that clock-event reason
# signals["missing"]: the GPU's rank as NCCL's RAS lists it missing (absent: not missing)
MISSING_UNRESPONSIVE, MISSING_DEAD = 1.0, 2.0
SIGNALS = ("sm", "tensor", "step", "clock", "throttle", "tx", "xmit_wait", "link", "read", "write", "pause", "cnp",
           "member", "temp", "pcie", "xid", "collective", "io_wait")
COLUMNS = ("job_id", "node", "gpu")


@dataclass(frozen=True)
class Features:
    """``signals[name]`` is a float32 matrix (times × GPUs); absent data is NaN, never zero. ``member``
    is 1 while the column's GPU is mapped to the column's job (``lockstep_gpu_job_info``), absent
    otherwise (a member whose mapping is gone: its node agent stopped answering, its pod was deleted);
    ``temp`` is the GPU's temperature (celsius); ``pcie`` 1 while its PCIe link runs below its width,
    ``xid`` 1 once the GPU has logged a hardware XID (the node agent's count since it started), both
    absent otherwise; ``io_wait`` the share of time the job's cgroup on the node stalled on I/O (PSI full: the
    job-io collector), absent where no agent reads it; besides ``SIGNALS``, ``reason:<reason>`` for each
    throttling clock-event reason
    held in the window (1 while held), and where the job's node agents read NCCL's RAS: ``collectives``
    (the rank's collectives per second), ``behind`` (collectives it is behind its communicators' furthest
    rank within one RAS answer), ``ras_age`` (seconds since that answer was taken) and ``missing``
    (``MISSING_UNRESPONSIVE``/``MISSING_DEAD`` while RAS lists it missing)."""

    times: np.ndarray          # Unix seconds, ascending
    columns: pd.MultiIndex     # (job_id, node, gpu), sorted by job then node then gpu (numeric)
    signals: dict[str, np.ndarray]
    pods: tuple[str, ...] = ()   # per column: the pod that held the GPU for the job (Kubernetes), else ""
    ranks: tuple[str, ...] = ()  # per column: its rank in the job's largest NCCL communicator, else ""

    def jobs(self) -> list[str]:
        return list(dict.fromkeys(self.columns.get_level_values("job_id")))

    def job_slice(self, job_id: str) -> slice:
        """Columns of ``job_id`` (they are contiguous: columns are sorted by job)."""
        return slice(*_bounds(self.columns.get_level_values("job_id"), job_id))


def _bounds(level: pd.Index, job_id: str) -> tuple[int, int]:
    hits = np.flatnonzero(np.asarray(level == job_id))
    return (int(hits[0]), int(hits[-1]) + 1) if len(hits) else (0, 0)


def job_columns(gpus: list[tuple[str, str, str]]) -> pd.MultiIndex:
    """``(job_id, node, gpu)`` columns in their order: by job, then node, then GPU (numeric)."""
    order = sorted(set(gpus), key=lambda c: (c[0], c[1], int(c[2]) if c[2].isdigit() else c[2]))
    return pd.MultiIndex.from_tuples(order, names=COLUMNS)
