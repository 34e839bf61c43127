"""Per-rank step times (``worker,step,seconds`` CSV, or ``lockstep_rank_step_seconds``) → stragglers
and imbalance.

Each worker's pace is taken relative to the job's median step by step, against its own usual pace
among its peers (``lockstep.analytics.scoring.relative``): a worker is slow in a step when it has become slower than
its peers, relative to its own first ``BASELINE`` records, by clearly more than the job's normal
spread (``K`` spreads, at least ``FLOOR``: Alibaba's fail-slow detection asks for a ≥ 10% shift),
and it is not faster than the job median. A rolling median over ``SMOOTH`` records keeps one noisy
record from flagging, and a flag needs ``SMOOTH`` slow records in a row. A worker that has differed
from the median since it started (a heavier stage, skewed data) is imbalance, reported for the job
(``lockstep.analytics.scoring.imbalance``), never a straggler. ``score`` is the worker's speed relative to its usual
pace over its flagged records (1 keeps up, 0.77 has become 1.3x slower), as straggler scores are.

Also read: the Alibaba PAI per-worker mini-batch times (``,worker,gpu,time,batch_time_norm``,
``cluster-trace-gpu-v2020/mini-batch-time``), with ``time`` as the step and ``batch_time_norm`` as
the seconds (normalised per job: only ratios between workers count, which is all this scorer uses).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lockstep.analytics.scoring import evidence, imbalance, relative
from lockstep.analytics.scoring.straggler import persistent
from lockstep.exporters.toolkit.configfile import ConfigError

BASELINE = 100
READY = 20          # records in the baseline before a worker is judged against it
SMOOTH = 5
K = 4.0
FLOOR = 0.08
HEADER = ("worker", "step", "seconds")
PAI_HEADER = ("", "worker", "gpu", "time", "batch_time_norm")
FORMATS = {HEADER: (0, 1, 2), PAI_HEADER: (1, 3, 4)}      # header → columns of worker, step, seconds


def parse_csv(path: str | Path) -> pd.DataFrame:
    """Read ``worker,step,seconds`` or the PAI layout (header required); a bad row is a ConfigError
    naming FILE:LINE."""
    rows: list[tuple[str, int, float]] = []
    try:
        handle = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = tuple(h.strip() for h in next(reader, ()))
        if header not in FORMATS:
            raise ConfigError(path, 1, "header", f"want {','.join(HEADER)} (or the PAI {','.join(PAI_HEADER)}), "
                                                 f"got {','.join(header) or '(empty)'}")
        for line, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            rows.append(_parse_row(path, line, row, header))
    return pd.DataFrame(rows, columns=list(HEADER))


def _parse_row(path: str | Path, line: int, row: list[str], header: tuple[str, ...]) -> tuple[str, int, float]:
    if len(row) != len(header):
        raise ConfigError(path, line, "", f"want {len(header)} columns ({','.join(header)}), got {len(row)}")
    worker, step, seconds = (row[i].strip() for i in FORMATS[header])
    if not worker:
        raise ConfigError(path, line, header[FORMATS[header][0]], "empty")
    try:
        step_n = int(step)
    except ValueError:
        raise ConfigError(path, line, header[FORMATS[header][1]], f"not an integer: {step!r}") from None
    try:
        secs = float(seconds)
    except ValueError:
        raise ConfigError(path, line, header[FORMATS[header][2]], f"not a number: {seconds!r}") from None
    if not np.isfinite(secs) or secs <= 0:
        raise ConfigError(path, line, header[FORMATS[header][2]], f"must be a positive number, got {seconds!r}")
    return worker, step_n, secs


@dataclass(frozen=True)
class Analysis:
    table: pd.DataFrame          # steps × workers, seconds
    drift: relative.Drift        # of the smoothed seconds
    bar: float                   # the excess that counts as clearly slower
    flagged: np.ndarray          # steps × workers, after persistence


def analyse(frame: pd.DataFrame) -> Analysis:
    table = frame.pivot_table(index="step", columns="worker", values="seconds", aggfunc="last").sort_index()
    table = table[sorted(table.columns, key=lambda w: (len(w), w))]
    smooth = table.rolling(SMOOTH, min_periods=1).median().to_numpy(dtype=float)
    d = relative.drift(smooth, np.ones(len(table), dtype=bool), BASELINE, FLOOR, READY)
    bar = relative.bar(d.spread, K, FLOOR)
    with np.errstate(invalid="ignore"):
        candidate = (d.excess >= bar) & (d.level >= 0.0)
    return Analysis(table, d, bar, persistent(candidate, SMOOTH))


def result(frame: pd.DataFrame, telemetry: pd.DataFrame | None = None) -> dict:
    """``{"stragglers": [...], "imbalance": [...]}`` (what ``steptimes --json`` prints): the job's
    imbalance finding as the evaluation report lists them, none when the workers are balanced; with
    ``telemetry`` of the same workers (``lockstep.analytics.scoring.stepcause``), the cause of each."""
    if frame.empty:
        return {"stragglers": [], "imbalance": []}
    a = analyse(frame)
    found = imbalance_of(a)
    out = {"stragglers": stragglers_of(a), "imbalance": [found] if found["ranks"] else []}
    if telemetry is not None and not telemetry.empty:
        from lockstep.analytics.scoring.stepcause import with_causes
        out = with_causes(out, a.table, a.drift, a.flagged, telemetry)
    return out


def stragglers(frame: pd.DataFrame) -> list[dict]:
    return result(frame)["stragglers"]


def stragglers_of(a: Analysis) -> list[dict]:
    """``[{worker, first_flagged_step, score, evidence}]``, ordered by first flag."""
    out = []
    for j in np.flatnonzero(a.flagged.any(axis=0)):
        hits = a.flagged[:, j]
        i = int(np.argmax(hits))
        out.append({"worker": str(a.table.columns[j]), "first_flagged_step": int(a.table.index[i]),
                    "score": round(float(np.exp(-np.median(a.drift.excess[hits, j]))), 3),
                    "evidence": {"signals": {"step_seconds": evidence.signal(a.drift, a.bar, i, j)}}})
    return sorted(out, key=lambda d: (d["first_flagged_step"], d["worker"]))


def imbalance_of(a: Analysis) -> dict:
    """The job's imbalance: workers off the median since they started, and the seconds it costs
    (each record standing for the steps up to the next one, in the file's units)."""
    learned = a.drift.learned
    steps = np.diff(a.table.index.to_numpy(), append=a.table.index[-1] + 1)
    hit = imbalance.involved(learned)
    share = imbalance.lost_share(learned, hit)
    lost = float(share * len(learned) * np.sum(steps * np.nanmax(a.table.to_numpy(), axis=1)))
    return imbalance.finding([{"worker": str(w)} for w in a.table.columns], learned, "step_seconds", lost, hit=hit)
