"""Pure pandas functions: range-query frames (``promrange.parse_matrix`` shape) in, report tables out.

GPU-hours: allocated from the Slurm GPU→job mapping (``lockstep_gpu_job_info``, one series per GPU held),
lost by cause from analytics' ``lockstep_job_lost_gpu_seconds_total``, productive = allocated − lost.
"""
from __future__ import annotations

import pandas as pd

from lockstep.analytics.report.queries import SAME_VALUE_REL
from lockstep.exporters.catalog.enums import LOSS_CAUSES as CAUSES

_META = ("timestamp", "value")


def with_cluster(frame: pd.DataFrame, default: str) -> pd.DataFrame:
    """``cluster`` comes from external_labels (absent on a single local Prometheus): name it."""
    frame = frame.copy()
    if "cluster" not in frame.columns:
        frame["cluster"] = default
    frame["cluster"] = frame["cluster"].fillna(default).replace("", default)
    return frame


def point_increases(frame: pd.DataFrame, start: float | None = None) -> pd.DataFrame:
    """Adds ``increase`` (each counter sample minus the series' previous one) and ``since`` (the
    previous sample's time: the increase happened in (since, timestamp]). A series first seen after
    ``start`` was born in the range (an exporter emits an XID or error series on its first event), so
    its first value counts in full; otherwise the first sample is the baseline (increase 0). A point
    whose value is not a number (NaN) is no sample of a counter: it is left out, so the next point
    follows the one before it and counts its increase only, not its whole value again."""
    series = [c for c in frame.columns if c not in _META]
    frame = frame[frame["value"].notna()].sort_values("timestamp")
    groups = frame.groupby(series, dropna=False)
    previous = groups["value"].shift()
    delta = frame["value"] - previous
    frame = frame.assign(since=groups["timestamp"].shift().fillna(frame["timestamp"]))
    # A drop within the backend's precision is the same value read back, no change: VictoriaMetrics answers a
    # float to 12 significant digits, and one value stored in two blocks can round to either side of the last.
    delta = delta.mask((delta < 0) & (-delta <= SAME_VALUE_REL * previous.abs()), 0.0)
    # A drop means the counter restarted from zero: the new value is all increase since the reset.
    delta = delta.where(delta.isna() | (delta >= 0), frame["value"])
    first = groups.cumcount() == 0
    born = first & (frame["timestamp"] > (start if start is not None else float("inf")))
    delta = delta.where(~first, frame["value"].where(born, 0.0))
    return frame.assign(increase=delta)


def counter_increase(frame: pd.DataFrame, keys: list[str], start: float | None = None) -> pd.DataFrame:
    """Increase of every counter series over the frame's range, reset-aware, summed by ``keys``."""
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "increase"])
    return point_increases(frame, start).groupby(keys, dropna=False, as_index=False)["increase"].sum()


def gpu_hours(allocated: pd.DataFrame, lost: pd.DataFrame, step_s: float,
              teams: dict[str, str] | None = None, start: float | None = None) -> pd.DataFrame:
    """Per (cluster, job_id): allocated, lost by cause, productive GPU-hours and goodput. ``team``
    comes from ``teams`` (job_id → team), else the job's Slurm user (``user`` label), else "unassigned"."""
    alloc = allocated.groupby(["cluster", "job_id"], as_index=False)["value"].sum()
    users = _job_users(allocated)
    alloc["allocated_gpu_h"] = alloc.pop("value") * step_s / 3600.0
    per_cause = counter_increase(lost, ["cluster", "job_id", "cause"], start) if not lost.empty else None
    table = alloc
    for cause in CAUSES:
        col = f"lost_{cause}_gpu_h"
        if per_cause is None:
            table[col] = 0.0
            continue
        part = per_cause[per_cause["cause"] == cause][["cluster", "job_id", "increase"]]
        table = table.merge(part.rename(columns={"increase": col}), how="left", on=["cluster", "job_id"])
        table[col] = table[col].fillna(0.0) / 3600.0
    lost_cols = [f"lost_{c}_gpu_h" for c in CAUSES]
    table["lost_gpu_h"] = table[lost_cols].sum(axis=1)
    table["productive_gpu_h"] = (table["allocated_gpu_h"] - table["lost_gpu_h"]).clip(lower=0.0)
    table["goodput"] = table["productive_gpu_h"] / table["allocated_gpu_h"].where(table["allocated_gpu_h"] > 0)
    team = table["job_id"].map(teams or {}).fillna(table["job_id"].map(users)).fillna("unassigned")
    table.insert(2, "team", team.replace("", "unassigned"))
    return table.sort_values(["cluster", "allocated_gpu_h"], ascending=[True, False]).reset_index(drop=True)


def _job_users(allocated: pd.DataFrame) -> dict[str, str]:
    if "user" not in allocated.columns:
        return {}
    named = allocated.dropna(subset=["user"])
    return dict(zip(named["job_id"], named["user"]))


def rollup(jobs: pd.DataFrame, by: str) -> pd.DataFrame:
    """GPU-hours summed per ``by`` (``cluster`` or ``team``), goodput recomputed from the sums."""
    hours = [c for c in jobs.columns if c.endswith("_gpu_h")]
    keys = ["cluster"] if by == "cluster" else ["cluster", by]
    table = jobs.groupby(keys, as_index=False)[hours].sum()
    table["jobs"] = jobs.groupby(keys)["job_id"].nunique().to_numpy()
    table["goodput"] = table["productive_gpu_h"] / table["allocated_gpu_h"].where(table["allocated_gpu_h"] > 0)
    return table


def rack_energy(energy: pd.DataFrame, peak: pd.DataFrame, budget: pd.DataFrame) -> pd.DataFrame:
    """Per (cluster, rack): kWh used, peak rack power, breaker budget and the headroom left.

    PDU energy counters are lifetime totals, never "born" in the range: a PDU first seen late (it was
    unreachable at the month's start) has its first sample as baseline, not years of energy."""
    if energy.empty and peak.empty:
        return pd.DataFrame(columns=["cluster", "rack", "energy_kwh", "peak_w", "budget_w", "headroom_w", "headroom_pct"])
    energy, peak, budget = (f if not f.empty else f.assign(rack=pd.Series(dtype=str)) for f in (energy, peak, budget))
    kwh = counter_increase(energy, ["cluster", "rack"])
    kwh["energy_kwh"] = kwh.pop("increase") / 3.6e6  # joules → kWh
    pk = peak.groupby(["cluster", "rack"], as_index=False)["value"].max().rename(columns={"value": "peak_w"})
    bud = budget.groupby(["cluster", "rack"], as_index=False)["value"].max().rename(columns={"value": "budget_w"})
    table = kwh.merge(pk, how="outer", on=["cluster", "rack"]).merge(bud, how="left", on=["cluster", "rack"])
    table["headroom_w"] = table["budget_w"] - table["peak_w"]
    table["headroom_pct"] = 100.0 * table["headroom_w"] / table["budget_w"]
    return table.sort_values("headroom_pct", na_position="last").reset_index(drop=True)


def daily_energy(energy: pd.DataFrame) -> pd.DataFrame:
    """kWh per rack per UTC day (wide: one column per rack), for the energy plot (lifetime counters,
    as in ``rack_energy``)."""
    if energy.empty:
        return pd.DataFrame()
    long = _daily_increases(energy)
    long["kwh"] = long["increase"] / 3.6e6  # joules → kWh
    wide = long.pivot_table(index="day", columns="rack", values="kwh", aggfunc="sum").fillna(0.0)
    wide.columns.name = None
    return wide


def daily_hours(energy: pd.DataFrame) -> pd.Series:
    """Hours of each UTC day the PDU energy counters cover (the best covered PDU's): under 24 on a
    partial day, the month's first day with data or today in a month-to-date report. A PDU always
    draws power, so a step without an increase holds no new sample (only the last one, looked back
    to)."""
    if energy.empty:
        return pd.Series(dtype=float, name="hours_of_data")
    long = _daily_increases(energy)
    long = long[long["increase"] > 0]
    if long.empty:
        return pd.Series(dtype=float, name="hours_of_data")
    series = [c for c in energy.columns if c not in _META]
    covered = (long["timestamp"] - long["since"]).groupby([*(long[c] for c in series), long["day"]]).sum()
    return (covered.groupby(level="day").max() / 3600.0).rename("hours_of_data")


def _daily_increases(energy: pd.DataFrame) -> pd.DataFrame:
    long = point_increases(energy)
    long["day"] = pd.to_datetime(long["since"], unit="s", utc=True).dt.strftime("%Y-%m-%d")
    return long


def imbalance(jobs: pd.DataFrame, waited: pd.DataFrame, ratio: pd.DataFrame, gpus: pd.DataFrame,
              start: float | None = None) -> pd.DataFrame:
    """Per job with imbalance: GPU-hours its ranks spent waiting for GPUs slower than the job median
    since they started, that as a share of the job's allocation, how many GPUs ran slow at most, and
    the slowest one's ratio to the median; most hours first. Imbalance is apart from the lost
    GPU-hours by cause (no straggler: nothing became slower)."""
    cols = ["cluster", "job_id", "team", "waited_gpu_h", "share_of_allocated", "slow_gpus", "slowest_ratio"]
    if waited.empty or jobs.empty:
        return pd.DataFrame(columns=cols)
    table = counter_increase(waited, ["cluster", "job_id"], start).rename(columns={"increase": "waited_gpu_h"})
    table["waited_gpu_h"] /= 3600.0
    table = table.merge(jobs[["cluster", "job_id", "team", "allocated_gpu_h"]], how="left", on=["cluster", "job_id"])
    table["share_of_allocated"] = table["waited_gpu_h"] / table.pop("allocated_gpu_h").where(lambda a: a > 0)
    for frame, name in ((gpus, "slow_gpus"), (ratio, "slowest_ratio")):
        peak = frame.groupby(["cluster", "job_id"], as_index=False)["value"].max() if not frame.empty else \
            pd.DataFrame(columns=["cluster", "job_id", "value"])
        table = table.merge(peak.rename(columns={"value": name}), how="left", on=["cluster", "job_id"])
    table = table[table["waited_gpu_h"] > 0]
    return table[cols].sort_values("waited_gpu_h", ascending=False).reset_index(drop=True)


def ledger(frame: pd.DataFrame, start: float | None = None) -> pd.DataFrame:
    """Per cluster, where the jobs' GPU-hours went: the goodput ledger's (``lockstep_job_ledger_gpu_seconds_total``)
    GPU-hours by kind and cause, each a share of the cluster's ledger, which sums to what the analytics
    service accounted of its jobs' allocation; most first."""
    cols = ["cluster", "kind", "cause", "gpu_h", "share"]
    if frame.empty:
        return pd.DataFrame(columns=cols)
    frame = frame.assign(**{k: (frame[k] if k in frame else "") for k in ("kind", "cause")})
    frame[["kind", "cause"]] = frame[["kind", "cause"]].fillna("").astype(str)   # an empty label is absent
    table = counter_increase(frame, ["cluster", "kind", "cause"], start)
    table["gpu_h"] = table.pop("increase") / 3600.0
    table["share"] = table["gpu_h"] / table.groupby("cluster")["gpu_h"].transform("sum").where(lambda t: t > 0)
    return table[cols].sort_values(["cluster", "gpu_h"], ascending=[True, False]).reset_index(drop=True)
