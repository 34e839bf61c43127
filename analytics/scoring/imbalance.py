"""Imbalance: ranks that differ from their job since they started, and what the difference costs.

A heavier pipeline stage, skewed data, a GPU or node that was slow before the job began: the rank's
usual pace (``relative.Drift.learned``, its baseline ratio to the job median) is off the median and
has stayed there. That is no straggler (nothing *became* slower; the health checks and validation
runs catch hardware that was broken before the job), but it costs the job every step: in lockstep
training each step waits for the slowest rank, so every other rank idles ``1 - own/slowest`` of it.

Which ranks: a Gaussian mixture over the usual paces (1 to 3 components, chosen by BIC) finds the
job's worker groups, and the ranks of a group at least ``FLOOR`` off the largest group are
involved. ``make eval`` weighs it against the simpler rule (a rank at least ``FLOOR`` off the
median): on worker groups only a few percent apart, amid 1-3% of silicon spread, the rule splits a
group and counts spread as imbalance, the mixture does not (``lockstep.analytics.evaluation.models``). The cost is
computed from the involved ranks alone, the others taken at the median.
"""
from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

from lockstep.analytics.scoring.nanstats import nan_reduce

FLOOR = 0.05          # log ratio: ranks ≥ ~5% off the job median since they started
MAX_GROUPS = 3
RANDOM_STATE = 0


def centred(learned: np.ndarray) -> np.ndarray:
    """Usual levels relative to the median of them (the per-sample median of noisy paces sits a little
    toward the slow side of a job with a slow few)."""
    finite = learned[np.isfinite(learned)]
    return learned - (np.median(finite) if len(finite) else 0.0)


def involved_by_rule(learned: np.ndarray, floor: float = FLOOR) -> np.ndarray:
    """Ranks whose usual level (log ratio to the job median) is at least ``floor`` off it."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(learned) & (np.abs(centred(learned)) >= floor)


@functools.cache
def _gaussian_mixture() -> type:
    """scikit-learn's GaussianMixture, imported on first use.

    Its ConvergenceWarning (identical paces: fewer groups than asked) is expected here, so it is filtered
    once for the process, not around each fit: ``warnings.catch_warnings`` is not thread-safe and the
    scorers run in worker threads."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    return GaussianMixture


_preloading = threading.Lock()
_preloaded: threading.Thread | None = None


def preload() -> threading.Thread:
    """Import the mixture (scikit-learn, with scipy: about a second of imports) in a thread of its own, once per
    process. A command calls this when it starts fetching what it will score, so that the import overlaps the
    fetching instead of coming after it (the post-mortem's scoring, a service's first result)."""
    global _preloaded
    with _preloading:
        if _preloaded is None:
            _preloaded = threading.Thread(target=_gaussian_mixture, name="preload-mixture", daemon=True)
            _preloaded.start()
        return _preloaded


def involved(learned: np.ndarray, floor: float = FLOOR) -> np.ndarray:
    """Ranks whose worker group (mixture component) is at least ``floor`` off the largest group."""
    mixture = _gaussian_mixture()
    ok = np.isfinite(learned)
    x = learned[ok].reshape(-1, 1)
    if len(x) < 4 or np.ptp(x) < floor:
        return involved_by_rule(learned, floor)
    distinct = len(np.unique(np.round(x, 6)))
    fits = [mixture(n, random_state=RANDOM_STATE).fit(x) for n in range(1, min(MAX_GROUPS, distinct) + 1)]
    best = min(fits, key=lambda m: m.bic(x))
    labels = best.predict(x)
    means = best.means_[:, 0]
    out = np.zeros(len(learned), dtype=bool)
    out[np.flatnonzero(ok)] = np.abs(means[labels] - means[np.bincount(labels).argmax()]) >= floor
    return out


def lost_share(learned: np.ndarray, hit: np.ndarray | None = None) -> float:
    """Share of the job's rank-time spent waiting because of the imbalance: with the ranks that are
    not involved at the median, each rank waits ``1 - own/slowest`` of every step."""
    hit = involved(learned) if hit is None else hit
    if not hit.any():
        return 0.0
    ratios = np.where(hit, np.exp(np.where(hit, centred(learned), 0.0)), 1.0)[np.isfinite(learned)]
    return float(np.mean(1.0 - ratios / ratios.max()))


def finding(ranks: list[dict], learned: np.ndarray, basis: str, lost: float, lost_key: str = "lost_seconds",
            hit: np.ndarray | None = None) -> dict:
    """The job-level finding: ``ranks`` (one label dict per rank, in ``learned`` order) that are
    involved, each with its ratio to the job median, slowest first; the pace signal it rests on
    (``basis``), the share of the ranks' time spent waiting for it and that time (``lost_key``)."""
    hit, level = involved(learned) if hit is None else hit, centred(learned)
    rows = [{**ranks[i], "ratio": round(float(np.exp(level[i])), 3)} for i in np.flatnonzero(hit)]
    rows.sort(key=lambda r: -r["ratio"])
    return {"ranks": rows, "basis": basis, "lost_share": round(lost_share(learned, hit), 4),
            lost_key: round(lost, 1)}


def extra_waiting(paces: np.ndarray, ratio: np.ndarray, compute: float = 1.0) -> np.ndarray:
    """Per sample, the share of the ranks' time spent waiting that ranks slow or fast by ``ratio`` (their
    usual compute against the median's; 1 for the others) add to the waiting for each sample's slowest:
    the ranks' waiting as they ran (``paces``: samples × ranks, seconds per step or compute activity)
    less their waiting with those ranks' compute at the median's, over the step as it ran; ``compute``
    is the share of a median rank's step that is compute (the all-reduce takes everyone the same time).
    Where the job's own jitter already sets each step's slowest rank, a few percent adds little."""
    def waiting(x: np.ndarray) -> np.ndarray:     # per sample, in the units of x
        return nan_reduce(np.nanmean, nan_reduce(np.nanmax, x, axis=1)[:, None] - x, axis=1)
    fixed = (1.0 - compute) * nan_reduce(np.nanmedian, paces, axis=1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        extra = (waiting(paces) - waiting(fixed + (paces - fixed) / ratio)) / nan_reduce(np.nanmax, paces, axis=1)
    return np.clip(np.nan_to_num(extra), 0.0, 1.0)


def compute_share(work: np.ndarray, steps: np.ndarray, hit: np.ndarray) -> float:
    """The share of a median rank's step that is its compute, from ranks off the median: their step time's
    ratio to the median's over their compute's (``work``, ``steps``: usual levels, log; 1 where unknown)."""
    rc, rs = np.exp(centred(work)), np.exp(centred(steps))
    ok = hit & np.isfinite(rc) & np.isfinite(rs) & (np.abs(rc - 1.0) > 2 * FLOOR / 5)
    if not ok.any():
        return 1.0
    return float(np.clip(np.median((rs[ok] - 1.0) / (rc[ok] - 1.0)), 0.0, 1.0))
