"""The review looks ahead: demand, failures per component and rack power as daily series, each with
its trend and a forecast (``forecast``), and when capacity or a rack's power budget runs out at it.

Only whole UTC days count (a day the report's points cover less than a step short of 24 hours would
read as a drop). Demand is allocated GPU-hours a day, capacity the GPUs seen (``lockstep_gpu_info``)
times 24; failures are hardware XIDs (memory ones apart) and InfiniBand links that went down, per
1,000 GPU-days beside the field priors (``priors``); power is each rack's daily peak against its budget.
"""
from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pandas as pd

from lockstep.analytics.report import forecast as fc
from lockstep.analytics.report import priors
from lockstep.analytics.report.tables import point_increases

D = 86400
# XIDs of GPU memory: double-bit ECC (48), row-remap failure (64), contained and uncontained memory errors
# (94, 95); exporters/catalog/xid.csv. A DBE also counts as an uncorrected ECC error: counted once, here.
MEMORY_XIDS = {"48", "64", "94", "95"}
NOT_WITHIN = f"not within {fc.HORIZON_DAYS} days"


def date(day: float | None) -> str:
    return NOT_WITHIN if day is None else datetime.fromtimestamp(day * D, timezone.utc).strftime("%Y-%m-%d")


def whole_days(frames: list[pd.DataFrame], step_s: float, end: float) -> np.ndarray:
    """UTC day numbers whose points (each standing for the step after it) cover the whole day."""
    stamps = np.unique(np.concatenate([f["timestamp"].to_numpy(float) for f in frames if not f.empty] or [[]]))
    stamps = stamps[stamps < end]
    days, counts = np.unique((stamps // D).astype(int), return_counts=True)
    return days[counts * step_s >= D - step_s]


def _daily(frame: pd.DataFrame, keys: list[str], days: np.ndarray, how: str, shift_s: float = 0.0) -> pd.DataFrame:
    """``frame``'s values summed or maxed per keys and day (zero-filled over ``days``), long."""
    if frame.empty or not len(days):
        return pd.DataFrame(columns=[*keys, "day", "value"])
    frame = frame.assign(day=((frame["timestamp"] - shift_s) // D).astype(int))
    grouped = frame[frame["day"].isin(days)].groupby([*keys, "day"], as_index=False)["value"].agg(how)
    full = grouped[keys].drop_duplicates().merge(pd.DataFrame({"day": days}), how="cross")
    return full.merge(grouped, how="left", on=[*keys, "day"]).fillna({"value": 0.0})


def _ahead(values: pd.Series, days: pd.Series) -> dict:
    f = fc.fit(values.to_numpy(), days.to_numpy())
    row = {"days": len(values), "trend_per_day": f.slope, "trend_lo": f.slope_lo, "trend_hi": f.slope_hi,
           "day90": f.mean[-1], "day90_lo": f.lo[-1], "day90_hi": f.hi[-1]}
    if len(values) >= fc.MIN_DAYS + 7:
        check = fc.backtest(values.to_numpy(), days.to_numpy())
        row |= {"backtest_mae": check.mean_abs_error, "backtest_coverage": check.coverage}
    return row | {"_forecast": f}


def _runs_out(row: dict, limit: float, name: str) -> dict:
    central, earliest = fc.runs_out(row["_forecast"], limit) if np.isfinite(limit) else (None, None)
    return {name: date(central), f"{name}_earliest": date(earliest)}


def daily_demand(allocated: pd.DataFrame, days: np.ndarray, step_s: float) -> pd.DataFrame:
    """Allocated GPU-hours per cluster and day (each point stands for the step after it)."""
    hours = allocated.assign(value=allocated["value"] * step_s / 3600.0) if not allocated.empty else allocated
    return _daily(hours, ["cluster"], days, "sum")


def daily_peak(peak: pd.DataFrame, days: np.ndarray, step_s: float) -> pd.DataFrame:
    """Each rack's peak power per day: a peak point is the maximum over the step before it."""
    return _daily(peak, ["cluster", "rack"], days, "max", shift_s=step_s)


def demand(daily: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """Per cluster: allocated GPU-hours a day, its trend and forecast, and when they fill the GPUs seen."""
    rows = []
    for cluster, part in daily.groupby("cluster"):
        if len(part) < fc.MIN_DAYS:
            continue
        seen = gpus[gpus["cluster"] == cluster]["value"].max() if not gpus.empty else np.nan
        row = {"cluster": cluster, "gpus": seen, "capacity_gpu_h_per_day": 24.0 * seen,
               "last_week_gpu_h_per_day": part["value"].tail(7).mean()} | _ahead(part["value"], part["day"])
        rows.append(row | _runs_out(row, 24.0 * seen, "capacity_full"))
    return pd.DataFrame(rows, columns=DEMAND_COLUMNS)


DEMAND_COLUMNS = ["cluster", "gpus", "capacity_gpu_h_per_day", "last_week_gpu_h_per_day", "days", "trend_per_day",
                  "trend_lo", "trend_hi", "day90", "day90_lo", "day90_hi", "capacity_full", "capacity_full_earliest",
                  "backtest_mae", "backtest_coverage", "_forecast"]


def power(daily: pd.DataFrame, budget: pd.DataFrame) -> pd.DataFrame:
    """Per rack: the daily peak power, its trend and forecast, and when it reaches the rack's budget."""
    limits = budget.groupby(["cluster", "rack"])["value"].max() if not budget.empty else pd.Series(dtype=float)
    rows = []
    for (cluster, rack), part in daily.groupby(["cluster", "rack"]):
        if len(part) < fc.MIN_DAYS:
            continue
        limit = float(limits.get((cluster, rack), np.nan))
        row = {"cluster": cluster, "rack": rack, "budget_w": limit, "peak_w": part["value"].max()} | \
            _ahead(part["value"], part["day"])
        rows.append(row | _runs_out(row, limit, "budget_reached"))
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


POWER_COLUMNS = ["cluster", "rack", "budget_w", "peak_w", "days", "trend_per_day", "trend_lo", "trend_hi", "day90",
                 "day90_lo", "day90_hi", "budget_reached", "budget_reached_earliest", "backtest_mae",
                 "backtest_coverage", "_forecast"]


def failure_events(xid: pd.DataFrame, flaps: pd.DataFrame, born: float | None) -> pd.DataFrame:
    """One row per counter increase: cluster, component, timestamp (the step's start), value (events)."""
    parts = []
    for frame, component in ((xid, lambda f: np.where(f["xid"].astype(str).isin(MEMORY_XIDS), "gpu memory", "gpu")),
                             (flaps, lambda f: "network")):
        if frame.empty:
            continue
        if "category" in frame.columns:     # the exporter's XID category: only hardware ones are failures
            frame = frame[frame["category"].isin(["hardware", ""]) | frame["category"].isna()]
        inc = point_increases(frame, born)
        inc = inc[inc["increase"] > 0]
        parts.append(pd.DataFrame({"cluster": inc["cluster"], "component": component(inc),
                                   "timestamp": inc["since"], "value": inc["increase"]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["cluster", "component", "timestamp",
                                                                                   "value"])


def failures(events: pd.DataFrame, gpus: pd.DataFrame, clusters: list[str], days: np.ndarray) -> pd.DataFrame:
    """Per cluster and component (every one the priors name, with or without events): events per
    1,000 GPU-days against the prior, their trend and the events expected in the next 90 days."""
    prior = priors.table().set_index("component")["per_1000_gpu_days"]
    base = pd.DataFrame([{"cluster": c, "component": k, "timestamp": d * D, "value": 0.0}
                         for c in clusters for k in prior.index for d in days[:1]])
    daily = _daily(pd.concat([base, events], ignore_index=True) if len(base) else events,
                   ["cluster", "component"], days, "sum")
    rows = []
    for (cluster, component), part in daily.groupby(["cluster", "component"]):
        if len(part) < fc.MIN_DAYS:
            continue
        seen = gpus[gpus["cluster"] == cluster]["value"].max() if not gpus.empty else np.nan
        rate = 1000.0 * part["value"].sum() / (seen * len(part))
        f = fc.fit(part["value"].to_numpy(), part["day"].to_numpy())
        rows.append({"cluster": cluster, "component": component, "days": len(part), "gpu_days": seen * len(part),
                     "events": part["value"].sum(), "per_1000_gpu_days": rate,
                     "prior_per_1000_gpu_days": prior.get(component, np.nan),
                     "ratio_to_prior": rate / prior.get(component, np.nan), "trend_per_day": f.slope,
                     "trend_lo": f.slope_lo, "trend_hi": f.slope_hi, "next_90d_events": f.total,
                     "next_90d_lo": f.total_lo, "next_90d_hi": f.total_hi})
    return pd.DataFrame(rows, columns=FAILURE_COLUMNS)


FAILURE_COLUMNS = ["cluster", "component", "days", "gpu_days", "events", "per_1000_gpu_days", "prior_per_1000_gpu_days",
                   "ratio_to_prior", "trend_per_day", "trend_lo", "trend_hi", "next_90d_events", "next_90d_lo",
                   "next_90d_hi"]


def daily_frame(table: pd.DataFrame, daily: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Observed days and forecast days of each row's series, long: for the plots and a CSV."""
    parts = []
    for _, row in table.iterrows():
        match = np.logical_and.reduce([daily[k] == row[k] for k in keys]) if len(daily) else []
        seen = daily[match] if len(daily) else daily
        f = row["_forecast"]
        parts.append(pd.DataFrame({**{k: row[k] for k in keys}, "day": seen["day"], "observed": seen["value"]}))
        parts.append(pd.DataFrame({**{k: row[k] for k in keys}, "day": f.days.astype(int), "forecast": f.mean,
                                   "lo": f.lo, "hi": f.hi}))
    if not parts:
        return pd.DataFrame(columns=[*keys, "date", "observed", "forecast", "lo", "hi"])
    out = pd.concat(parts, ignore_index=True)
    out.insert(len(keys), "date", [date(d) for d in out.pop("day")])
    return out.reindex(columns=[*keys, "date", "observed", "forecast", "lo", "hi"])
