"""A fake Prometheus' answers from a simulated run's frame (``frame_block`` on the step grid of each window),
each computed once: the analytics service's tests ask the same windows of the same run again and again.

Only the rows a window can read are handed to ``frame_block`` (a query reads up to two steps before its
window, and a sample further off the grid is dropped), so the answer is the one from all of them without
filtering the whole run on every query. Every caller gets its own copy of an answer."""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from lockstep.analytics.evaluation.emulate import by_metric, frame_block
from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window
from lockstep.exporters.catalog import fabric


class FrameAnswers:
    def __init__(self, frame: pd.DataFrame) -> None:
        self.by_metric = {m: (rows, rows["timestamp"].to_numpy(dtype=float)) for m, rows in by_metric(frame).items()}
        self._answers: dict[tuple, Block] = {}

    def answer(self, inp: Input, window: Window, job_id: str, nodes: tuple[str, ...] | None) -> Block:
        key = (inp, window, job_id, nodes)
        if key not in self._answers:
            lo, hi = window.start - 3 * window.step, window.end + window.step
            read = (*inp.metrics, fabric.IB_STATE.name)
            rows = {m: _between(rows, times, lo, hi) for m, (rows, times) in self.by_metric.items() if m in read}
            self._answers[key] = frame_block(rows, inp, window, job_id, nodes)
        return copy.deepcopy(self._answers[key])


# Each frame's answers, held with the frame itself so that its id stays its own for the whole session.
_HELD: dict[tuple, tuple[pd.DataFrame, FrameAnswers]] = {}


def answers_for(frame: pd.DataFrame, down: tuple[float, float] | None = None) -> FrameAnswers:
    """The answers of ``frame``, without its samples strictly inside ``down`` (a store that was down then)."""
    key = (id(frame), down)
    if key not in _HELD:
        rows = frame if down is None else frame[~frame["timestamp"].between(*down, inclusive="neither")]
        _HELD[key] = frame, FrameAnswers(rows)
    return _HELD[key][1]


def _between(rows: pd.DataFrame, times: np.ndarray, lo: float, hi: float) -> pd.DataFrame:
    """The rows from ``lo`` to ``hi``, in their order: a slice where they are in time order (as the simulator
    writes a run, tick by tick)."""
    if (times[1:] >= times[:-1]).all():
        return rows.iloc[np.searchsorted(times, lo, "left"):np.searchsorted(times, hi, "right")]
    return rows[(times >= lo) & (times <= hi)]
