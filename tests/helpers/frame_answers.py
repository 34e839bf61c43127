"""A fake Prometheus' answers from a simulated run's frame (``emulate.Answers``: ``frame_block`` on the step grid of
each window, from the rows the window can read), each computed once: the analytics service's tests ask the same
windows of the same run again and again. Every caller gets its own copy of an answer."""
from __future__ import annotations

import copy

import pandas as pd

from lockstep.analytics.evaluation.emulate import Answers
from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window


class FrameAnswers:
    def __init__(self, frame: pd.DataFrame) -> None:
        self._source = Answers(frame)
        self._answers: dict[tuple, Block] = {}

    def answer(self, inp: Input, window: Window, job_id: str, nodes: tuple[str, ...] | None) -> Block:
        key = (inp, window, job_id, nodes)
        if key not in self._answers:
            self._answers[key] = self._source.block(inp, window, job_id, nodes)
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
