"""Imbalance: ranks that differ from their job since they started, and what the difference costs.

A heavier pipeline stage, skewed data, a GPU or node that was slow before the job began: the rank's
usual pace (``relative.Drift.learned``, its baseline ratio to the job median) is off the median and
has stayed there. That is no straggler (nothing *became* slower; the health checks and validation
runs catch hardware that was broken before the job), but it costs the job every step: in lockstep
training each step waits for the slowest rank, so every other rank idles ``1 - own/slowest`` of it.

Only ranks at least ``FLOOR`` off the median count (a few percent of silicon and power-cap spread is
every cluster's normal); the cost is computed from those ranks alone, the others taken at the median.
"""
from __future__ import annotations

import numpy as np

FLOOR = 0.05          # log ratio: ranks ≥ ~5% off the job median since they started


def centred(learned: np.ndarray) -> np.ndarray:
    """Usual levels relative to the median of them (the per-sample median of noisy paces sits a little
    toward the slow side of a job with a slow few)."""
    finite = learned[np.isfinite(learned)]
    return learned - (np.median(finite) if len(finite) else 0.0)


def involved(learned: np.ndarray, floor: float = FLOOR) -> np.ndarray:
    """Ranks whose usual level (log ratio to the job median) is at least ``floor`` off it."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(learned) & (np.abs(centred(learned)) >= floor)


def lost_share(learned: np.ndarray, floor: float = FLOOR) -> float:
    """Share of the job's rank-time spent waiting because of the imbalance: with the ranks that are
    not involved at the median, each rank waits ``1 - own/slowest`` of every step."""
    hit = involved(learned, floor)
    if not hit.any():
        return 0.0
    ratios = np.where(hit, np.exp(np.where(hit, centred(learned), 0.0)), 1.0)[np.isfinite(learned)]
    return float(np.mean(1.0 - ratios / ratios.max()))


def finding(ranks: list[dict], learned: np.ndarray, basis: str, lost: float, lost_key: str = "lost_seconds",
            floor: float = FLOOR) -> dict:
    """The job-level finding: ``ranks`` (one label dict per rank, in ``learned`` order) that are
    involved, each with its ratio to the job median, slowest first; the pace signal it rests on
    (``basis``), the share of the ranks' time spent waiting for it and that time (``lost_key``)."""
    hit, level = involved(learned, floor), centred(learned)
    rows = [{**ranks[i], "ratio": round(float(np.exp(level[i])), 3)} for i in np.flatnonzero(hit)]
    rows.sort(key=lambda r: -r["ratio"])
    return {"ranks": rows, "basis": basis, "lost_share": round(lost_share(learned, floor), 4),
            lost_key: round(lost, 1)}
