"""A result's own-history baseline: the median of the same test's last good runs on the same node and scale.

The node computes it because it holds the history (validation runs are daily or rarer, often longer ago
than Prometheus keeps data). Peer and floor baselines need other nodes and hardware figures: they are
Prometheus recording rules (alerts/).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from lockstep.validation.result import Result

# Figures judged against a baseline: higher is better (bandwidth, rates). Latencies and error counts are
# reported, not baselined.
BASELINED_UNITS = ("bytes_per_second", "per_second")


@dataclass(frozen=True)
class BaselinePolicy:
    runs: int = 10        # the median of the last N good runs (a few bad ones do not move it)
    min_runs: int = 3     # fewer good runs than this: no baseline yet

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.runs:
            raise ValueError(f"baseline needs 1 <= min_runs ({self.min_runs}) <= runs ({self.runs})")


def history_entry(result: Result) -> dict:
    """What history keeps of a run: its time, status and baselined figures (not the per-size detail)."""
    return {"started": result.started, "status": result.status,
            "figures": {f.key: f.value for f in result.figures if f.unit in BASELINED_UNITS}}


def history_baseline(previous: list[dict], policy: BaselinePolicy) -> dict[str, float]:
    """Median per figure over the last ``policy.runs`` passing runs in ``previous`` (oldest first) that
    have it; figures with fewer than ``policy.min_runs`` such runs get none."""
    values: dict[str, list[float]] = {}
    for entry in reversed(previous):
        if entry.get("status") != "pass":
            continue
        for key, value in entry.get("figures", {}).items():
            bucket = values.setdefault(key, [])
            if len(bucket) < policy.runs:
                bucket.append(float(value))
    return {key: statistics.median(v) for key, v in sorted(values.items()) if len(v) >= policy.min_runs}


def ratios(result: Result, baseline: dict[str, float]) -> dict[str, float]:
    """Each baselined figure of ``result`` over its baseline (1.0: as usual; 0.7: 30 % below)."""
    return {f.key: f.value / baseline[f.key] for f in result.figures
            if f.key in baseline and baseline[f.key] > 0}
