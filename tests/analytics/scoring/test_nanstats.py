"""``lockstep.analytics.scoring.nanstats``: numpy's NaN reductions, silent and thread-safe."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.analytics.scoring.nanstats import nan_reduce


@pytest.mark.parametrize("fn, args", [(np.nanmedian, ()), (np.nanmean, ()), (np.nanmax, ()),
                                      (np.nanquantile, (0.9,))])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_nan_reduce_is_numpys_reduction_with_nan_for_a_slice_without_values(fn, args, axis):
    """What numpy gives, bit for bit and in the matrix's own dtype, NaN where a slice has no value, and
    no warning raised (here warnings are errors) or left in the filters."""
    m = np.array([[1.0, np.nan, 3.0, 0.1], [np.nan] * 4, [2.0, 5.0, np.nan, 7.0]], dtype=np.float32)
    filters = list(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nan_reduce(fn, m, *args, axis=axis)
    assert warnings.filters == filters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(m, *args, axis=axis)
    assert np.asarray(got).dtype == np.float32 and np.array_equal(got, want, equal_nan=True)
    assert np.isnan(nan_reduce(fn, np.full((2, 3), np.nan), *args, axis=axis)).all()


def test_scoring_threads_leave_the_process_warning_filters_as_they_were():
    """The scorers run in worker threads (``asyncio.to_thread``). Before: ``nan_reduce`` silenced numpy's
    "All-NaN slice" warning with ``warnings.catch_warnings``, which is not thread-safe; threads at once
    leaked the warning and left an "ignore RuntimeWarning" filter behind for the whole process."""
    m = np.full((50, 64), np.nan)
    m[:25] = 1.0
    filters = list(warnings.filters)

    def work():
        for _ in range(300):
            nan_reduce(np.nanmedian, m, axis=1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.filters == filters


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 6), long=st.one_of(st.integers(1, 12), st.integers(13, 599), st.integers(600, 640)),
       axis=st.sampled_from([0, 1]), dtype=st.sampled_from([np.float32, np.float64]),
       nan_share=st.sampled_from([0.0, 0.1, 0.5, 0.99]), ties=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_a_median_along_an_axis_is_numpys_from_one_sort(rows, long, axis, dtype, nan_share, ties, seed):
    """Medians along an axis of a matrix take one sort: numpy's, value for value, in the matrix's dtype, whether numpy
    goes through a masked array (slices under 600 values) or calls Python per slice (600 or more); odd and even
    counts, ties, NaN-only slices."""
    rng = np.random.default_rng(seed)
    m = (rng.integers(0, 5, (rows, long)) if ties else rng.normal(size=(rows, long))).astype(dtype)
    m[rng.random(m.shape) < nan_share] = np.nan
    m[0, : long // 2] = np.nan                       # a slice with about half its values
    m = m if axis == 1 else m.T
    got = nan_reduce(np.nanmedian, m, axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmedian(m, axis=axis)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
