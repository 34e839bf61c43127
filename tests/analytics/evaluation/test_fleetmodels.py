"""``lockstep.analytics.evaluation.fleetmodels``: each refresh's rows scored in one call and put back in place."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.evaluation.fleetmodels import _apply


def test_scores_from_one_call_land_on_their_own_refresh_and_row():
    """Rows with a NaN feature get NaN; every complete row gets its own score, whatever the refreshes' sizes
    (an empty refresh, one with nothing complete, one with everything complete)."""
    nan = np.nan
    per = [np.array([[1.0, 2.0], [nan, 1.0], [3.0, 4.0]]), np.empty((0, 2)), np.array([[nan, nan]]),
           np.array([[5.0, 6.0], [7.0, 8.0]])]
    calls = []

    def score(x):
        calls.append(len(x))
        return x[:, 0] * 10 + x[:, 1]

    out = _apply(per, score)
    assert calls == [4]
    assert [len(v) for v in out] == [3, 0, 1, 2]
    np.testing.assert_array_equal(out[0], [12.0, nan, 34.0])
    np.testing.assert_array_equal(out[2], [nan])
    np.testing.assert_array_equal(out[3], [56.0, 78.0])


def test_no_complete_row_asks_for_no_score():
    out = _apply([np.array([[np.nan, 1.0]])], lambda x: 1 / 0)
    np.testing.assert_array_equal(out[0], [np.nan])
