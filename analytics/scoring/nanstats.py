"""NaN-skipping reductions over the scorers' matrices, silent and thread-safe."""
from __future__ import annotations

import numpy as np


def nan_reduce(fn, matrix: np.ndarray, *args, axis: int | None = None, **kwargs) -> np.ndarray:
    """``fn`` (a NaN-skipping reduction: nanmean, nanmedian, nanquantile, nanmax) of ``matrix`` along
    ``axis``, NaN where a slice holds no value at all.

    Such slices never reach ``fn``, which would warn "All-NaN slice" or "Mean of empty slice". Silencing
    that with ``warnings.catch_warnings`` is not thread-safe, and the scorers run in worker threads: two
    of them at once leaked the warning and left an "ignore RuntimeWarning" filter behind for the whole
    process."""
    matrix = np.asarray(matrix)   # its own dtype: the frame's matrices are float32
    has_value = ~np.isnan(matrix).all(axis=axis)
    if np.all(has_value):
        return fn(matrix, *args, axis=axis, **kwargs)
    keep = has_value if axis is None else np.expand_dims(has_value, axis)
    return np.where(has_value, fn(np.where(keep, matrix, 0.0), *args, axis=axis, **kwargs), np.nan)
