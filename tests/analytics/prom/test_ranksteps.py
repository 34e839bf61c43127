"""The step-feed counters' raw samples → the step-time scorer's rows: one per scrape interval in which steps ended,
the interval's mean step time, named by the rank's last step number."""
from __future__ import annotations

import pandas as pd
import pytest

from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.analytics.prom.ranksteps import _series, frame


def rows(df: pd.DataFrame) -> list[tuple]:
    return [(w, s, round(x, 6)) for w, s, x in df.itertuples(index=False)]


def test_one_scrape_per_step_gives_each_steps_own_time():
    steps = {"0": {10.0: 1, 11.0: 2, 12.5: 3}}
    seconds = {"0": {10.0: 0.0, 11.0: 1.0, 12.5: 2.5}}
    last = {"0": {10.0: 0, 11.0: 1, 12.5: 2}}
    assert rows(frame(steps, seconds, last)) == [("0", 1, 1.0), ("0", 2, 1.5)]


def test_a_coarse_scrape_gives_the_intervals_mean_named_by_its_last_step():
    steps = {"3": {0.0: 4, 15.0: 14, 30.0: 24}}
    seconds = {"3": {0.0: 3.0, 15.0: 18.0, 30.0: 38.0}}
    assert rows(frame(steps, seconds, {"3": {15.0: 140, 30.0: 240}})) == [("3", 140, 1.5), ("3", 240, 2.0)]
    # without step numbers, the step count names the row
    assert rows(frame(steps, seconds)) == [("3", 14, 1.5), ("3", 24, 2.0)]


def test_an_interval_without_steps_or_with_a_reset_counter_is_no_row():
    steps = {"1": {0.0: 5, 1.0: 5, 2.0: 6, 3.0: 1, 4.0: 2}}
    seconds = {"1": {0.0: 4.0, 1.0: 4.0, 2.0: 5.0, 3.0: 0.0, 4.0: 2.0}}
    assert rows(frame(steps, seconds)) == [("1", 6, 1.0), ("1", 2, 2.0)]


def test_a_rank_missing_either_counter_gives_nothing_and_ranks_sort_numerically():
    steps = {"10": {0.0: 1, 1.0: 2}, "2": {0.0: 1, 1.0: 2}, "4": {0.0: 1, 1.0: 2}}
    seconds = {"10": {0.0: 0.0, 1.0: 1.0}, "2": {0.0: 0.0, 1.0: 1.0}}
    assert [w for w, _, _ in rows(frame(steps, seconds))] == ["2", "10"]
    assert list(frame({}, {}).columns) == ["worker", "step", "seconds"]


def test_a_matrix_answer_is_read_and_anything_else_is_malformed():
    answer = [{"metric": {"rank": "0", "gpu": ""}, "values": [[1.0, "1"], [2.0, "2"]]},
              {"metric": {"rank": "0", "gpu": "3"}, "values": [[3.0, "3"]]}]
    assert _series(answer, "q") == {"0": {1.0: 1.0, 2.0: 2.0, 3.0: 3.0}}
    with pytest.raises(MalformedAnswer, match="q: not a matrix"):
        _series([{"metric": {"rank": "0"}, "value": [1.0, "1"]}], "q")
