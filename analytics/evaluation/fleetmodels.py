"""scikit-learn detectors weighed against the peer rule (median/MAD) on the same simulated fleet.

Both see the rule's deviations (each feature in robust units from its peer median): a robust
covariance (``MinCovDet``: a flag where the robust Mahalanobis distance is beyond the chi-square tail,
which knows that features move together) and an isolation forest (a flag below the lowest 0.01 % of
the scores it was fitted on). Fitted once on a seeded subsample of every GPU-window of the fleet, each
model's flags go through the rule's persistence (``lockstep.analytics.evaluation.fleet.grade``, with
the model's own threshold); the figures repeat (fixed ``random_state``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lockstep.analytics.scoring import peers

RANDOM_STATE = 0
FIT_ROWS = 20_000
TAIL = 1e-7
IFOREST_QUANTILE = 1e-4


def _rows(w) -> tuple[np.ndarray, list[np.ndarray]]:
    per = [d[list(peers.NAMES)].to_numpy(dtype=float) for d in w.deviations]
    stacked = np.concatenate(per)
    return stacked[np.isfinite(stacked).all(axis=1)], per


def _as_scores(w, values: list[np.ndarray]) -> list[pd.Series]:
    return [pd.Series(v, index=d.index) for v, d in zip(values, w.deviations)]


def _apply(per: list[np.ndarray], fn) -> list[np.ndarray]:
    """``fn``'s score of each refresh's complete rows (NaN for the others), from one call over all of them: each row
    is scored on its own, and a call costs scikit-learn's checks and set-up again (for the forest, most of its time
    over a fleet's refreshes one by one)."""
    ok = [np.isfinite(x).all(axis=1) for x in per]
    rows = np.concatenate([x[k] for x, k in zip(per, ok)]) if per else np.empty((0, 0))
    scores = fn(rows) if len(rows) else np.empty(0)
    out, at = [], 0
    for x, k in zip(per, ok):
        v = np.full(len(x), np.nan)
        v[k] = scores[at:at + int(k.sum())]
        at += int(k.sum())
        out.append(v)
    return out


def model_scores(w) -> dict[str, tuple[list[pd.Series], float]]:
    """Model name → (a score per refresh and GPU, higher worse; the threshold on it)."""
    from scipy.stats import chi2
    from sklearn.covariance import MinCovDet
    from sklearn.ensemble import IsolationForest

    fit_rows, per = _rows(w)
    rng = np.random.default_rng(RANDOM_STATE)
    fit = fit_rows[rng.permutation(len(fit_rows))[:FIT_ROWS]]
    mcd = MinCovDet(random_state=RANDOM_STATE).fit(fit)
    forest = IsolationForest(random_state=RANDOM_STATE, n_estimators=100).fit(fit)
    cut = float(np.quantile(-forest.score_samples(fit), 1 - IFOREST_QUANTILE))
    return {"robust covariance": (_as_scores(w, _apply(per, mcd.mahalanobis)), float(chi2.isf(TAIL, fit.shape[1]))),
            "isolation forest": (_as_scores(w, _apply(per, lambda x: -forest.score_samples(x))), cut)}
