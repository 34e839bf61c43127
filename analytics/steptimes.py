"""Per-rank step times (``worker,step,seconds`` CSV, or ``lockstep_rank_step_seconds``) → stragglers.

A worker is slow in a step when its time is ``MIN_SLOWDOWN`` above the best ranks of that step
(NVIDIA's resiliency extension compares each rank with the best one) *and* above its own history
(Alibaba's fail-slow detection asks for a ≥ 10% shift); a rolling median over ``SMOOTH`` steps keeps
one noisy step from flagging or unflagging a worker. ``score`` is the worker's speed relative to the
best ranks over its flagged steps, best/own (1 keeps up, 0.77 is 1.3x slower), as straggler scores are.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from exporters.configfile import ConfigError

MIN_SLOWDOWN = 0.1
SMOOTH = 5
HISTORY = 200
BEST_Q = 0.1
HEADER = ("worker", "step", "seconds")


def parse_csv(path: str | Path) -> pd.DataFrame:
    """Read ``worker,step,seconds`` (header required); a bad row is a ConfigError naming FILE:LINE."""
    rows: list[tuple[str, int, float]] = []
    try:
        handle = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = tuple(h.strip() for h in next(reader, ()))
        if header != HEADER:
            raise ConfigError(path, 1, "header", f"want {','.join(HEADER)}, got {','.join(header) or '(empty)'}")
        for line, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            rows.append(_parse_row(path, line, row))
    return pd.DataFrame(rows, columns=list(HEADER))


def _parse_row(path: str | Path, line: int, row: list[str]) -> tuple[str, int, float]:
    if len(row) != 3:
        raise ConfigError(path, line, "", f"want 3 columns ({','.join(HEADER)}), got {len(row)}")
    worker, step, seconds = (c.strip() for c in row)
    if not worker:
        raise ConfigError(path, line, "worker", "empty")
    try:
        step_n = int(step)
    except ValueError:
        raise ConfigError(path, line, "step", f"not an integer: {step!r}") from None
    try:
        secs = float(seconds)
    except ValueError:
        raise ConfigError(path, line, "seconds", f"not a number: {seconds!r}") from None
    if not np.isfinite(secs) or secs <= 0:
        raise ConfigError(path, line, "seconds", f"must be a positive number, got {seconds!r}")
    return worker, step_n, secs


def slowdowns(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """steps × workers: smoothed slowdown against the best ranks, and against the worker's own history."""
    table = frame.pivot_table(index="step", columns="worker", values="seconds", aggfunc="last").sort_index()
    best = table.quantile(BEST_Q, axis=1)
    vs_best = (1.0 - table.rdiv(best, axis=0)).clip(lower=0.0)
    vs_best = vs_best.rolling(SMOOTH, min_periods=1).median()
    history = table.rolling(HISTORY, min_periods=SMOOTH).median().shift(SMOOTH)
    vs_own = (table.rolling(SMOOTH, min_periods=1).median() / history) - 1.0
    return vs_best, vs_own


def stragglers(frame: pd.DataFrame) -> list[dict]:
    """``[{worker, first_flagged_step, score}]``, ordered by first flag."""
    if frame.empty:
        return []
    vs_best, vs_own = slowdowns(frame)
    # No history yet (the first steps): the comparison with the best ranks decides alone.
    flagged = (vs_best >= MIN_SLOWDOWN) & (vs_own.isna() | (vs_own >= MIN_SLOWDOWN))
    flagged &= flagged.rolling(SMOOTH, min_periods=SMOOTH).sum().eq(SMOOTH)   # persists SMOOTH steps
    out = []
    for worker in flagged.columns[flagged.any()]:
        hits = flagged[worker]
        out.append({"worker": str(worker), "first_flagged_step": int(hits.idxmax()),
                    # reported as speed relative to the best ranks (0.77 = 1.3x slower), as the contract
                    "score": round(1.0 - float(vs_best.loc[hits, worker].median()), 3)})
    return sorted(out, key=lambda d: (d["first_flagged_step"], d["worker"]))
