"""What the service keeps between refreshes, as plain data: each job's cumulative loss counters, and its
own health.

The loss counters add only samples newer than the last ones already accounted, so overlapping windows
are never counted twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from lockstep.exporters.catalog.enums import LOSS_CAUSES, ledger_zero


class Accounted(Protocol):
    """What the loss counters read of a job's scored window (a ``JobResult`` is one)."""

    times: np.ndarray
    columns: pd.Index
    lost: Mapping[str, np.ndarray]
    imbalance_lost: np.ndarray
    ledger: Mapping[str, Mapping[str, np.ndarray]] | None   # GPU-seconds per sample by kind and cause


@dataclass
class Health:
    up: bool = False
    stale: bool = False
    last_success: float | None = None
    failures: int = 0
    duration_s: float = 0.0
    rejected_job_ids: tuple[str, ...] = ()
    last_error: str = ""
    fetched_samples: int = 0    # samples the last refresh fetched (the held windows moved on: the new rows only)
    full_fetches: int = 0       # jobs whose window the last refresh fetched whole (new, changed, or after a gap)
    answers_too_large: int = 0  # Prometheus answers not read past --prometheus-max-answer-size, since start


@dataclass
class LossCounters:
    accounted_until: float = float("-inf")
    allocated: float = 0.0
    lost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOSS_CAUSES, 0.0))
    imbalance: float = 0.0      # GPU-seconds spent waiting for ranks slow since they started (no loss cause)
    # the goodput ledger, kind -> cause -> GPU-seconds: its entries sum to ``allocated``
    ledger: dict[str, dict[str, float]] = field(default_factory=ledger_zero)
    checkpoints: int = 0                  # checkpoints counted (each once it ended), their seconds and bytes
    checkpoint_seconds: float = 0.0
    checkpoint_bytes: float = 0.0
    last_checkpoint: dict | None = None   # the last counted: {start_timestamp, duration_s, bytes, bandwidth...}

    def add(self, res: Accounted, period: float) -> None:
        if self.accounted_until == float("-inf") and len(res.times):
            self.accounted_until = float(res.times[0])   # its interval lies before the data
        new = res.times > self.accounted_until
        if not new.any():
            return
        allocated = float(new.sum()) * period * len(res.columns)
        self.allocated += allocated
        for cause in LOSS_CAUSES:
            self.lost[cause] += float(res.lost[cause][new].sum())
        self.imbalance += float(res.imbalance_lost[new].sum())
        if res.ledger is not None:
            self._book(res.ledger, new, allocated)
        self.accounted_until = float(res.times[new][-1])

    def add_checkpoints(self, rows: Sequence[Mapping]) -> None:
        """The window's checkpoints that ended (``lockstep.analytics.scoring.checkpoints``) and start after the
        last one counted: overlapping windows measure a checkpoint again, it is counted once."""
        last = self.last_checkpoint["start_timestamp"] + self.last_checkpoint["duration_s"] if self.last_checkpoint \
            else float("-inf")
        for c in rows:
            if c["complete"] and c["start_timestamp"] >= last:
                self.checkpoints += 1
                self.checkpoint_seconds += c["duration_s"]
                self.checkpoint_bytes += c["bytes"]
                self.last_checkpoint = {k: c[k] for k in ("start_timestamp", "duration_s", "bytes",
                                                          "bandwidth_bytes_per_second", "mount", "fstype") if k in c}
                last = c["start_timestamp"] + c["duration_s"]

    def _book(self, ledger: Mapping[str, Mapping[str, np.ndarray]], new: np.ndarray, allocated: float) -> None:
        """The new samples' ledger, its productive entry what the losses leave of ``allocated``: what is
        added sums to what is allocated, to the last bit a float sum allows."""
        lost = 0.0
        for kind, by_cause in ledger.items():
            for cause, values in by_cause.items():
                if kind != "productive":
                    v = float(values[new].sum())
                    self.ledger[kind][cause] += v
                    lost += v
        self.ledger["productive"][""] += allocated - lost

    def behind(self, window_start: float) -> bool:
        """Counted before, but not up to ``window_start``: a gap to catch up first. A window's first sample
        is context only (its counters' rates need the sample before), so a window counts from its second
        sample on and its first must already be counted, by an earlier window that held the one before."""
        return float("-inf") < self.accounted_until < window_start

    def goodput(self) -> float | None:
        return 1.0 - sum(self.lost.values()) / self.allocated if self.allocated else None
