"""The report's steps fitted to the data found: coarse enough for a month, fine enough for minutes of
data, never finer than the samples, never coarser than asked."""
from __future__ import annotations

import pytest

from lockstep.analytics.report.coverage import Coverage
from lockstep.analytics.report.fit import adapt, query_start
from lockstep.analytics.report.queries import Steps

DAY = 86400.0
START = 1_790_812_800.0  # 2026-10-01T00:00Z


@pytest.mark.parametrize("span_s,resolution,asked,want", [
    (31 * DAY, 5.0, Steps(3600, 30), Steps(3600, 30)),      # a whole month: as asked
    (31 * DAY, 60.0, Steps(3600, 30), Steps(3600, 60)),     # stalls can't be seen finer than the samples
    (DAY, 5.0, Steps(3600, 30), Steps(600, 30)),            # a day: ≥ 100 points
    (20 * 60, 5.0, Steps(3600, 30), Steps(10, 10)),         # twenty minutes of a demo
    (20 * 60, 30.0, Steps(3600, 30), Steps(30, 30)),        # ...never finer than the samples
    (31 * DAY, 5.0, Steps(300, 5), Steps(300, 5)),          # never coarser than asked
])
def test_adapt(span_s, resolution, asked, want):
    coverage = Coverage(START + 3600, START + 3600 + span_s - resolution, resolution)
    assert adapt(asked, coverage) == want


def test_queries_start_a_step_before_the_first_data_on_the_months_grid():
    coverage = Coverage(START + 10 * DAY + 125.0, START + 11 * DAY, 5.0)
    # the first data lies in the minute before its first minute mark, 10 days 65-125 s in
    assert query_start(START, coverage, Steps(60, 30)) == START + 10 * DAY + 60
    assert query_start(START, Coverage(START + 60, START + DAY, 5.0), Steps(3600, 30)) == START
    assert query_start(START, None, Steps(3600, 30)) == START
