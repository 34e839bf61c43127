"""Per-node reductions of a times × GPUs matrix: the job's nodes' columns found once, and the nodes
with as many GPUs reduced together, not one call per node (the loop over a 65,536-GPU job's
nodes, each masking every column, cost more than the rest of its scoring)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def node_columns(nodes: np.ndarray) -> tuple[list, list[np.ndarray]]:
    """The nodes in order of first appearance, and each one's columns (ascending)."""
    codes, names = pd.factorize(np.asarray(nodes))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return list(names), [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def nanmedian(block: np.ndarray, axis: int) -> np.ndarray:
    """``nan_reduce(np.nanmedian, block, axis=axis)`` for a short ``axis`` (a node's GPUs), from one sort:
    the two middle finite values averaged (the same one twice for an odd count), as NumPy's own median
    of a short masked slice does; NaN where the slice holds none."""
    ordered = np.sort(block, axis=axis)                       # NaN last
    count = np.expand_dims((~np.isnan(block)).sum(axis=axis), axis)
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=axis)
    high = np.take_along_axis(ordered, count // 2 - (count == 0), axis=axis)
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, (low + high) / 2.0, np.nan).squeeze(axis)


def per_node(matrix: np.ndarray, groups: list[np.ndarray], reduce) -> np.ndarray:
    """times × nodes: ``reduce(block, axis=2)`` of each node's columns (``groups``), the same values as
    ``reduce(matrix[:, columns], axis=1)`` node by node."""
    sizes = np.asarray([len(g) for g in groups])
    out = None
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        part = reduce(matrix[:, np.stack([groups[k] for k in which])], axis=2)
        if out is None:
            out = np.empty((matrix.shape[0], len(groups)), dtype=part.dtype)
        out[:, which] = part
    return out if out is not None else np.empty((matrix.shape[0], 0))
