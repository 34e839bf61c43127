"""A simulator's series frame (FORMATS.md) turned into the features the scorers read, each input's
answer computed as Prometheus gives it (``emulate``) and placed as the service places Prometheus'
(``lockstep.analytics.frame.window``): the evaluation scores exactly what the service would."""
from __future__ import annotations

import numpy as np
import pandas as pd

from lockstep.analytics.evaluation.emulate import by_metric, frame_block
from lockstep.analytics.frame.features import Features, job_columns
from lockstep.analytics.frame.inputs import INPUT_METRICS, INPUTS, MEMBER, WRITE_BY_MOUNT
from lockstep.analytics.frame.window import JobWindow
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.scoring.checkpoints import target
from lockstep.analytics.scoring.score import JobResult, score_features
from lockstep.analytics.service.targets import nodes_of, placed, wanted, written
from lockstep.exporters.catalog import gpu


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
    frame = frame[frame["metric"].isin(INPUT_METRICS)]
    rows_of = by_metric(frame)
    grid = frame_grid(frame)
    window = JobWindow.empty(grid, job_columns(_job_map(frame)))
    for inp in INPUTS:
        if inp is MEMBER:
            for job_id in dict.fromkeys(window.columns.get_level_values("job_id")):
                window.place(inp, frame_block(rows_of, inp, grid, job_id), job_id=job_id)
        else:
            window.place(inp, frame_block(rows_of, inp, grid))
    return window.features()


def score_frame(frame: pd.DataFrame, start: float | None = None, period: float | None = None) -> dict[str, JobResult]:
    """Score every job in a FORMATS.md series frame, each checkpoint with its target file system."""
    results = score_features(build_features(frame), start, period)
    writes = by_metric(frame[frame["metric"].isin(WRITE_BY_MOUNT.metrics)])
    step = frame_grid(frame).step
    for job_id, res in results.items():
        found = {i: target(written(frame_block(writes, WRITE_BY_MOUNT, window, job_id, nodes_of(res))))
                 for i, window in wanted(res, float("-inf"), step)}
        results[job_id] = placed(res, found)
    return results
