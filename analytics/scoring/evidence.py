"""What a flag carries: for each signal that agreed, its value against its reference and the job's
spread, as plain JSON numbers (the API, the evaluation report and ``steptimes --json`` serve it)."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.scoring.relative import Drift


def rounded(v: float, digits: int = 3) -> float | None:
    return round(float(v), digits) if np.isfinite(v) else None


def signal(d: Drift, bar: float, i: int, j: int) -> dict:
    """One signal at sample ``i`` of rank ``j``: its ratio to the job median then (``ratio``), the
    rank's usual ratio (``usual_ratio``), the change against that relative to the peers (``change``:
    1.3 = 30% slower than usual among its peers), the change that counts as clearly slower
    (``bar``), and the job's normal spread of the change (``spread``, log: about a relative one)."""
    return {"ratio": rounded(np.exp(d.level[i, j])), "usual_ratio": rounded(np.exp(d.baseline[i, j])),
            "change": rounded(np.exp(d.excess[i, j])), "bar": rounded(np.exp(bar)), "spread": rounded(d.spread, 4)}


def plain(value):
    """NaN → None, numpy scalars → Python numbers, recursively (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return None if value != value else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
