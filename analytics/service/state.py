"""What the service keeps between refreshes, as plain data: each job's cumulative loss counters, and its
own health.

The loss counters add only samples newer than the last ones already accounted, so overlapping windows
are never counted twice. The newest samples wait: what a sample cost is only known once later ones
confirmed it (a slowdown is reported after it lasted, and counts from its start), so a running job's
samples are booked once they are ``settle`` seconds old (``LossCounters.add``), and those still waiting
when the job ends are booked as last scored (``LossCounters.settle``).
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


@dataclass(frozen=True)
class _Booking:
    """What some samples of a scored window cost, in the counters' terms."""
    until: float                                   # the last sample's time
    allocated: float
    lost: dict[str, float]
    imbalance: float
    ledger: dict[tuple[str, str], float] | None    # (kind, cause) -> GPU-seconds, the productive entry left out

    @classmethod
    def of(cls, res: Accounted, mask: np.ndarray, period: float) -> _Booking:
        ledger = None if res.ledger is None else {
            (kind, cause): float(values[mask].sum()) for kind, by_cause in res.ledger.items() if kind != "productive"
            for cause, values in by_cause.items()}
        return cls(float(res.times[mask][-1]), float(mask.sum()) * period * len(res.columns),
                   {cause: float(res.lost[cause][mask].sum()) for cause in LOSS_CAUSES},
                   float(res.imbalance_lost[mask].sum()), ledger)


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
    pending: _Booking | None = None       # the newest samples, scored but not booked yet (``add``, ``settle``)

    def add(self, res: Accounted, period: float, until: float | None = None) -> None:
        """Book ``res``'s samples newer than the last booked, up to ``until`` (default: all of them); those
        after ``until`` are held as ``pending``, replaced by each later call, booked only by ``settle()``."""
        times = res.times
        if self.accounted_until == float("-inf") and len(times):
            self.accounted_until = float(times[0])   # its interval lies before the data
        last = float("inf") if until is None else until
        new = (times > self.accounted_until) & (times <= last)
        tail = times > max(self.accounted_until, last)
        self.pending = _Booking.of(res, tail, period) if tail.any() else None
        if new.any():
            self._commit(_Booking.of(res, new, period))

    def settle(self) -> None:
        """Book the samples held as pending (the job ended: no later sample will change what they cost)."""
        if self.pending is not None:
            self._commit(self.pending)
            self.pending = None

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

    def _commit(self, b: _Booking) -> None:
        self.allocated += b.allocated
        for cause, v in b.lost.items():
            self.lost[cause] += v
        self.imbalance += b.imbalance
        if b.ledger is not None:
            lost = 0.0
            for (kind, cause), v in b.ledger.items():
                self.ledger[kind][cause] += v
                lost += v
            # the productive entry is what the losses leave of the allocation: what is added sums to what is
            # allocated, to the last bit a float sum allows
            self.ledger["productive"][""] += b.allocated - lost
        self.accounted_until = max(self.accounted_until, b.until)

    def behind(self, window_start: float) -> bool:
        """Counted before, but not up to ``window_start``: a gap to catch up first. A window's first sample
        is context only (its counters' rates need the sample before), so a window counts from its second
        sample on and its first must already be counted, by an earlier window that held the one before."""
        return float("-inf") < self.accounted_until < window_start

    def goodput(self) -> float | None:
        return 1.0 - sum(self.lost.values()) / self.allocated if self.allocated else None
