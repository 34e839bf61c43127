"""Peer-relative health: each GPU against the GPUs of its model and driver across the fleet.

A GPU that passes every fixed check can still run well below its siblings (a clock capped with no
reason given, a hot spot at normal power, a PCIe link trained narrow). Read while loaded, such a GPU
sits far from its peers' median on one feature. The rule is the plain robust one: per peer group
and feature, the distance from the median in MAD units (scaled to a standard deviation, with a floor
relative to the median so a group of identical values does not turn noise into infinity), signed so
that positive is worse; the outlier score is the worst feature, and the features over the threshold
are the evidence. ``make eval`` weighs scikit-learn models against this rule on a simulated fleet
(``lockstep.analytics.evaluation.fleet``); the rule is kept while none of them beats it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Feature:
    name: str
    worse: int      # +1: higher is worse; -1: lower is worse
    floor: float    # smallest spread counted, as a fraction of the peer median
    help: str
    least: float = 1e-12   # smallest spread counted, in the feature's own unit (a median near 0 has no fraction)


FEATURES = (
    Feature("sm_clock", -1, 0.01, "SM clock over its maximum while loaded below the power cap"),
    Feature("power", +1, 0.01, "power over the limit per unit of SM activity while loaded"),
    # centred on 0 by construction; at least 2 C/kW, about the sensor's 1 C step at an H100's 700 W
    Feature("thermal", +1, 0.0, "temperature at a given power: what is left of the temperature once the peers' "
                                "slope on power and the node's shared inlet are taken out, per kW drawn", least=2.0),
    Feature("pcie", -1, 0.01, "PCIe link capacity (lanes x per-lane rate of its generation) over its maximum while loaded"),
)
NAMES = tuple(f.name for f in FEATURES)
# The raw inputs the thermal feature is derived from (median while loaded, per GPU).
TEMPERATURE, POWER_W = "temperature_c", "power_w"
INPUTS = ("sm_clock", "power", "pcie", TEMPERATURE, POWER_W)
GROUP = ("model", "driver")
MAD_SIGMA = 1.4826     # MAD of a normal distribution times this is its standard deviation
THRESHOLD = 5.0        # robust units beyond the peer median that make a GPU an outlier
CLEAR = 3.0            # a degraded GPU clears below this (hysteresis: no flapping at the threshold)
MIN_PEERS = 8          # smaller groups get no score: a median of a few says little
# The thermal feature's Theil-Sen slope is the median over every pair of a peer group's GPUs: n² / 2 pairs, 0.5
# million for 1,024 GPUs, 134 million (seconds of CPU and gigabytes) for 16,384, more than a machine's memory for a
# 65,536-GPU fleet of one model and driver. Larger groups take the pairs of a seeded sample of this many GPUs (as
# scikit-learn's TheilSenRegressor takes a stochastic subpopulation): the same slope within its noise, the same
# every time for the same group.
SLOPE_PEERS = 1024
PERSIST_S = 600.0      # an outlier at every refresh for this long before the verdict is degraded


def deviations(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``: one row per GPU (index ``node, gpu``), columns ``model``, ``driver`` and the features
    (NaN where absent). Returns the signed robust distance of each feature from its peer group's median
    (positive worse); NaN where the feature is absent or the group has fewer than ``MIN_PEERS`` values."""
    out = np.full((len(frame), len(NAMES)), np.nan)
    # by position, on the columns' arrays: a group's rows taken as a frame (and the thermal feature assigned to it)
    # cost most of a fleet pass, as assigning them by their labels had before
    columns = {f.name: frame[f.name].to_numpy(dtype=float) for f in FEATURES if f.name in frame}
    derived = {TEMPERATURE, POWER_W} <= set(frame)
    if derived:
        t, p = frame[TEMPERATURE].to_numpy(dtype=float), frame[POWER_W].to_numpy(dtype=float)
        node = pd.factorize(frame.index.get_level_values("node"))[0]
    for at in frame.groupby(list(GROUP), sort=False).indices.values():
        group = {name: values[at] for name, values in columns.items()}
        if derived:
            group["thermal"] = thermal(t[at], p[at], node[at])
        for column, f in enumerate(FEATURES):
            if f.name not in group:
                continue
            x = group[f.name]
            ok = np.isfinite(x)
            if ok.sum() < MIN_PEERS:
                continue
            med = float(np.median(x[ok]))
            spread = max(MAD_SIGMA * float(np.median(np.abs(x[ok] - med))), f.floor * abs(med), f.least)
            out[at, column] = f.worse * (x - med) / spread
    return pd.DataFrame(out, index=frame.index, columns=list(NAMES))


def thermal(t: np.ndarray, p: np.ndarray, node: np.ndarray) -> np.ndarray:
    """Temperature at a given power, for one peer group: a GPU's temperature is its node's inlet plus its
    thermal resistance times its power. The peers' Theil-Sen slope of temperature on power estimates
    the resistance; taking it out leaves the inlet plus the GPU's excess, and the mean of that over the
    node's other GPUs (they share the inlet) is taken out too. A GPU drawing more (leaky silicon) or a neighbour
    drawing far less (a slow GPU) then does not read as hot; per kW drawn, so an idle-ish job's noise
    is not inflated. Read from one peer group's temperatures, powers and node codes (-1: a GPU without a node)."""
    r = t - _slope(p, t) * p
    nameless = node < 0
    node = np.where(nameless, node.max(initial=-1) + 1, node)
    seen = np.isfinite(r)
    total = np.bincount(node, np.where(seen, r, 0.0))[node]     # per GPU, its node's sum and count of residuals
    count = np.where(nameless, 0, np.bincount(node, seen)[node])   # (a GPU without a node has no neighbours)
    with np.errstate(divide="ignore", invalid="ignore"):
        others = (total - np.nan_to_num(r)) / (count - np.isfinite(r))   # the node's other GPUs: its own excess
        return np.where((p > 0) & (count > 1), (r - others) / (p / 1000.0), np.nan)   # does not pull its reference


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen slope of ``y`` on ``x`` (the median of pairwise slopes: an outlier does not tilt it),
    0 where there are too few pairs or no spread in ``x``; over ``SLOPE_PEERS`` of them at most."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < MIN_PEERS:
        return 0.0
    if len(x) > SLOPE_PEERS:     # a seeded sample of the group's GPUs (SLOPE_PEERS)
        picked = np.sort(np.random.default_rng(0).choice(len(x), SLOPE_PEERS, replace=False))
        x, y = x[picked], y[picked]
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    keep = np.abs(dx) > 1e-12
    return float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0


def scores(dev: pd.DataFrame) -> pd.Series:
    """The worst feature per GPU (NaN where none was scored)."""
    arr = dev.to_numpy(dtype=float)
    has = np.isfinite(arr).any(axis=1)
    worst = np.full(len(arr), np.nan)
    worst[has] = np.nanmax(np.where(np.isfinite(arr[has]), arr[has], -np.inf), axis=1)
    return pd.Series(worst, index=dev.index, name="score")


def evidence(dev: pd.DataFrame, threshold: float = THRESHOLD) -> dict[tuple, dict[str, float]]:
    """Per outlier GPU, the features beyond ``threshold`` and how far (robust units, positive worse)."""
    out: dict[tuple, dict[str, float]] = {}
    for key, row in dev.iterrows():
        far = {name: round(float(v), 2) for name, v in row.items() if np.isfinite(v) and v >= threshold}
        if far:
            out[key] = far
    return out


@dataclass
class Verdicts:
    """The ``degraded`` verdict: an outlier score over ``THRESHOLD`` at every refresh for ``PERSIST_S``;
    it clears once the score falls below ``CLEAR``. A GPU with no score (idle, not enough load in the
    window) keeps its streak and its verdict: idling is no evidence either way."""

    since: dict[tuple, float] = field(default_factory=dict)   # first refresh of the current streak over THRESHOLD
    degraded: set[tuple] = field(default_factory=set)

    def update(self, score: pd.Series, at: float) -> set[tuple]:
        # Only the GPUs over THRESHOLD now and those with a streak or a verdict are looked at: for the rest (most of
        # a fleet) a score has nothing to change, and visiting each cost a fleet pass a tenth of its time.
        over = set()
        for i in np.flatnonzero(score.to_numpy(dtype=float) >= THRESHOLD):   # NaN is never over
            key = score.index[i]
            over.add(key)
            if at - self.since.setdefault(key, at) >= PERSIST_S:
                self.degraded.add(key)
        for key in {*self.since, *self.degraded} - over:
            value = float(score[key]) if key in score.index else np.nan
            if np.isfinite(value):
                self.since.pop(key, None)
                if value < CLEAR:
                    self.degraded.discard(key)
        return set(self.degraded)
