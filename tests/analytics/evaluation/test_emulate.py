"""``lockstep.analytics.evaluation.emulate``: counter rates as Prometheus' ``irate`` computes them."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.evaluation.emulate import irate


def test_counter_rates_follow_prometheus_irate_over_two_steps():
    """As Prometheus 2.42 answers ``irate(c[10s])`` at 5 s steps (checked on promtool-backfilled samples):
    the last two samples at or before each step; a missed scrape leaves the rate across the gap, a
    counter that went down restarted from zero, and two steps after the last sample there is none."""
    nan = float("nan")
    counter = np.array([[0.0, 0.0], [10.0, 10.0], [20.0, nan], [5.0, 30.0], [15.0, 40.0], [25.0, nan], [35.0, nan]])
    rate = irate(counter, 5.0)
    assert np.isnan(rate[0]).all()
    assert rate[1:, 0].tolist() == [2.0, 2.0, 1.0, 2.0, 2.0, 2.0]          # 5 / 5 s after the restart
    assert rate[1:6, 1].tolist() == [2.0, 2.0, 2.0, 2.0, 2.0] and np.isnan(rate[6, 1])


def test_an_answer_from_the_rows_its_window_reads_is_the_answer_from_the_whole_run():
    """``Answers`` hands ``frame_block`` only the rows of each window's time span (the run sliced by time, or picked
    where its rows are out of time order): for every input, at the run's start, middle and end, for the job or every
    job, on every node or on a few, the same answer as from all of the run's rows."""
    from lockstep.analytics.evaluation.emulate import Answers, by_metric, frame_block
    from lockstep.analytics.evaluation.evaluate import simulate
    from lockstep.analytics.frame.inputs import INPUTS
    from lockstep.analytics.prom.grid import Window
    from tests.helpers.paths import REPO

    run = simulate(REPO / "tests/fixtures/analytics/scenarios/severe.yaml")
    whole, sliced = by_metric(run.frame), Answers(run.frame)
    job = str(run.truth["jobs"][0]["job_id"])
    nodes = tuple(sorted(run.frame["node"].astype(str).unique()))
    end = run.start + run.truth["duration_s"]
    windows = [Window(run.start, run.start + 60, run.period), Window(run.start + 300, run.start + 420, run.period),
               Window(end - 60, end + 30, run.period)]
    shuffled = run.frame.sample(frac=1.0, random_state=0)
    cases = [((whole, sliced), w) for w in windows] + [((by_metric(shuffled), Answers(shuffled)), windows[1])]
    compared = 0
    for inp in INPUTS:
        for frames, window in cases:
            for job_id, on in ((job, None), (job, nodes[:2]), (None, None)):
                want, got = frame_block(frames[0], inp, window, job_id, on), frames[1].block(inp, window, job_id, on)
                assert got.labels == want.labels, (inp.name, window, job_id, on)
                for field in ("series", "rows", "values"):
                    np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
                compared += want.samples
    assert compared > 0
