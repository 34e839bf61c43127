"""Per-GPU feature matrices, and a simulator frame turned into them.

Each signal is one matrix: rows are sample times, columns are ``(job_id, node, gpu)``; node-wide
signals (storage, PFC) are repeated on every GPU column of the node so that all matrices share one
shape. Both sources reach them through the same code: the service's answers to the inputs' queries
(``analytics.inputs``, ``analytics.decode``) and a simulator frame's answers computed as Prometheus
would (``analytics.emulate``) are placed by ``analytics.window``; everything downstream is shared.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.grid import Window
from analytics.inputs import INPUT_METRICS, INPUTS, MEMBER, REASON_PREFIX  # noqa: F401  (INPUT_METRICS: re-exported)
from exporters.catalog import gpu

SIGNALS = ("sm", "tensor", "step", "clock", "throttle", "tx", "xmit_wait", "link", "read", "write", "pause", "cnp",
           "member")
COLUMNS = ("job_id", "node", "gpu")


@dataclass(frozen=True)
class Features:
    """``signals[name]`` is a float32 matrix (times × GPUs); absent data is NaN, never zero. ``member``
    is 1 while the column's GPU is mapped to the column's job (``lockstep_gpu_job_info``), absent
    otherwise (a member whose mapping is gone: its node agent stopped answering, its pod was deleted);
    besides ``SIGNALS``, ``reason:<reason>`` for each throttling clock-event reason held in the window
    (1 while held)."""

    times: np.ndarray          # Unix seconds, ascending
    columns: pd.MultiIndex     # (job_id, node, gpu), sorted by job then node then gpu (numeric)
    signals: dict[str, np.ndarray]
    pods: tuple[str, ...] = ()   # per column: the pod that held the GPU for the job (Kubernetes), else ""

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


def _job_map(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(job, node, gpu) for each GPU, with the job holding it for most of the frame (``lockstep_gpu_job_info``)."""
    info = frame[(frame["metric"] == gpu.JOB_INFO.name) & (frame["value"] > 0)]
    info = info[info["job_id"].astype(str) != ""]
    if info.empty:
        return []
    counts = info.groupby(["node", "gpu", "job_id"], observed=True).size()
    best = counts.sort_values().groupby(level=["node", "gpu"], observed=True).tail(1)
    return [(str(j), str(n), str(g)) for n, g, j in best.index]


def frame_grid(frame: pd.DataFrame) -> Window:
    """The grid of a frame's sample times (the simulator's ticks)."""
    times = np.sort(frame["timestamp"].unique().astype(float))
    if not len(times):
        return Window(0.0, -1.0, 1.0)
    step = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    grid = Window(float(times[0]), float(times[-1]), step)
    if (grid.row_of(times) < 0).any():
        raise ValueError(f"frame timestamps are not on a grid of {step:g} s steps")
    return grid


def build_features(frame: pd.DataFrame) -> Features:
    """The feature matrices of every GPU that belongs to a job in ``frame`` (FORMATS.md series frame):
    each input's answer computed as Prometheus gives it, placed as the service places Prometheus'."""
    from analytics.emulate import frame_block
    from analytics.window import JobWindow

    frame = frame[frame["metric"].isin(INPUT_METRICS)]
    by_metric = {str(name): rows for name, rows in frame.groupby("metric", observed=True) if len(rows)}
    grid = frame_grid(frame)
    window = JobWindow.empty(grid, job_columns(_job_map(frame)))
    for inp in INPUTS:
        if inp is MEMBER:
            for job_id in dict.fromkeys(window.columns.get_level_values("job_id")):
                window.place(inp, frame_block(by_metric, inp, grid, job_id), job_id=job_id)
        else:
            window.place(inp, frame_block(by_metric, inp, grid))
    return window.features()
