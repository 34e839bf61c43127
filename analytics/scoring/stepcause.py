"""The cause of the step-time scorer's findings, where telemetry of the same ranks is at hand.

``lockstep analytics steptimes FILE.csv --telemetry HW.csv``: the step-time scorer's stragglers and
imbalance (``lockstep.analytics.scoring.steptimes``) judged on each worker's hardware
(``lockstep.analytics.scoring.cause``): a CSV with header ``worker,step`` and any of
``clock_ratio`` (SM clock over its maximum), ``temperature_celsius``, ``reasons`` (the clock-event
reasons held, separated by ``;``), ``pcie_degraded`` and ``hardware_xid`` (1 or 0); a row holds from its
step until the worker's next one. Each straggler gains ``cause`` (hardware, transient, unknown), each
imbalance rank and finding ``cause`` (work, unknown), and a worker slow since it started whose hardware
explains it moves from the imbalance to the stragglers (``since_start``), as the telemetry scorer
reports it. Without telemetry the results are the step-time scorer's, unchanged.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import REASON_PREFIX
from lockstep.analytics.scoring import cause, imbalance
from lockstep.exporters.catalog.enums import CLOCK_EVENT_REASONS, HARDWARE, TRANSIENT, WORK
from lockstep.exporters.toolkit.configfile import ConfigError

COLUMNS = {"clock_ratio": "clock", "temperature_celsius": "temp", "pcie_degraded": "pcie", "hardware_xid": "xid"}


def parse_telemetry(path: str | Path) -> pd.DataFrame:
    """Rows of ``worker, step`` and the signals present; a bad row is a ConfigError naming FILE:LINE."""
    try:
        handle = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    rows = []
    with handle:
        reader = csv.DictReader(handle)
        known = {"worker", "step", "reasons", *COLUMNS}
        header = reader.fieldnames or []
        if header[:2] != ["worker", "step"] or set(header) - known:
            raise ConfigError(path, 1, "header", f"want worker,step and any of {','.join(sorted(known - {'worker', 'step'}))}, "
                                                 f"got {','.join(header) or '(empty)'}")
        for line, row in enumerate(reader, start=2):
            rows.append(_row(path, line, row))
    return pd.DataFrame(rows)


def _row(path: str | Path, line: int, row: dict) -> dict:
    out: dict = {"worker": (row.get("worker") or "").strip()}
    try:
        out["step"] = int(row["step"])
        for name in COLUMNS:
            if (row.get(name) or "").strip():
                out[name] = float(row[name])
    except (TypeError, ValueError):
        raise ConfigError(path, line, "", "want an integer step and numbers") from None
    reasons = [r.strip() for r in (row.get("reasons") or "").split(";") if r.strip()]
    if unknown := set(reasons) - set(CLOCK_EVENT_REASONS):
        raise ConfigError(path, line, "reasons", f"unknown clock-event reason {sorted(unknown)[0]!r}")
    out["reasons"] = tuple(reasons)
    return out


def signals(telemetry: pd.DataFrame, steps: pd.Index, workers: pd.Index) -> dict[str, np.ndarray]:
    """The telemetry as the matrices ``cause.hardware`` reads (steps × workers), each row held forward."""
    def matrix(values: pd.Series) -> np.ndarray:
        frame = pd.DataFrame({"worker": telemetry["worker"], "step": telemetry["step"], "v": values})
        table = frame.pivot_table(index="step", columns="worker", values="v", aggfunc="last")
        table = table.reindex(index=table.index.union(steps)).sort_index().ffill().reindex(index=steps)
        return table.reindex(columns=workers).to_numpy(dtype=float)

    out = {"clock": np.full((len(steps), len(workers)), np.nan)}
    for column, name in COLUMNS.items():
        if column in telemetry:
            out[name] = matrix(telemetry[column].where(telemetry[column] != 0) if name in ("pcie", "xid")
                               else telemetry[column])
    for reason in sorted({r for held in telemetry["reasons"] for r in held}):
        out[REASON_PREFIX + reason] = np.nan_to_num(matrix(pd.Series([float(reason in held) for held in telemetry["reasons"]],
                                                                     index=telemetry.index)))
    return out


def with_causes(found: dict, table: pd.DataFrame, drift, flagged: np.ndarray, telemetry: pd.DataFrame) -> dict:
    """``found`` (``steptimes.result``'s) with the cause of each finding judged on ``telemetry``."""
    workers = pd.Index(table.columns)
    hw = cause.hardware(signals(telemetry, table.index, workers), np.ones(len(table), bool))
    stragglers = []
    for s in found["stragglers"]:
        j = workers.get_loc(s["worker"])
        rows = flagged[:, j]
        pace = float(np.nanmedian(drift.excess[rows, j])) if rows.any() else 0.0
        what, why = cause.judge(hw, rows, j, pace, TRANSIENT)
        stragglers.append({**s, "cause": what, "evidence": {**s["evidence"], "cause": why}})
    level = imbalance.centred(drift.learned)
    out = {"stragglers": stragglers, "imbalance": []}
    for imb in found["imbalance"]:
        ranks = []
        for r in imb["ranks"]:
            j = workers.get_loc(r["worker"])
            what, why = cause.judge(hw, np.ones(len(table), bool), j, float(level[j]), WORK)
            if what == HARDWARE:     # slow since it started, its hardware explaining it: a straggler
                stragglers.append({"worker": r["worker"], "first_flagged_step": int(table.index[0]),
                                   "score": round(1.0 / r["ratio"], 3), "evidence": {"cause": why},
                                   "cause": HARDWARE, "since_start": True})
            else:
                ranks.append({**r, "cause": what, "evidence": why})
        if ranks:
            kept = {r["worker"] for r in ranks}
            hit = np.array([w in kept for w in workers])
            share = imbalance.lost_share(drift.learned, hit)
            lost = {"lost_seconds": round(imb["lost_seconds"] * share / imb["lost_share"], 1)} \
                if len(ranks) < len(imb["ranks"]) and imb["lost_share"] else {}
            out["imbalance"].append({**imb, "ranks": ranks, "lost_share": round(share, 4), **lost,
                                     "cause": cause.combined([r["cause"] for r in ranks], WORK)})
    stragglers.sort(key=lambda d: (d["first_flagged_step"], d["worker"]))
    return out
