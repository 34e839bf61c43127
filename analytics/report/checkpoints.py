"""Checkpoint cost: how long each checkpoint blocked the job, and the storage bandwidth that would halve it.

Where the analytics service measured each checkpoint (``lockstep_job_checkpoints_total``, its seconds and
bytes: lockstep.analytics.scoring.checkpoints), the figures are those (``source`` ``measured``): the count,
the mean time each took to write, the bytes, and the bandwidth they achieved. For a job without them (an
older analytics service), they are estimated from its checkpoint stalls (``source`` ``stalls``), as follows.

A blocking checkpoint is write-bound: blocked time ≈ bytes / bandwidth. The bytes of each checkpoint
are the write burst seen during its stall (the cluster's bytes written per step, summed over the
stall widened by a margin on both sides: the stall is scored from other series than the writes,
scraped at other moments). Halving the blocked time needs twice the bandwidth that burst achieved.
"""
from __future__ import annotations

import pandas as pd

from lockstep.analytics.report.tables import counter_increase

COLUMNS = ["cluster", "job_id", "checkpoints", "mean_blocked_s", "max_blocked_s", "total_blocked_h",
           "mean_write_gb", "observed_write_gb_s", "bandwidth_to_halve_gb_s"]
KEYS = ["cluster", "job_id"]


def measured_cost(count: pd.DataFrame, seconds: pd.DataFrame, written: pd.DataFrame,
                  start: float | None = None) -> pd.DataFrame:
    """Per (cluster, job_id) with a checkpoint counted in the range: the service's measured figures
    (``max_blocked_s`` is the longest mean of a step, the counters holding no single checkpoint's)."""
    if count.empty:
        return pd.DataFrame(columns=[*COLUMNS, "source"])
    table = counter_increase(count, KEYS, start).rename(columns={"increase": "checkpoints"})
    for name, frame in (("seconds", seconds), ("bytes", written)):
        part = counter_increase(frame, KEYS, start).rename(columns={"increase": name}) if not frame.empty else None
        table = table.merge(part, how="left", on=KEYS) if part is not None else table.assign(**{name: 0.0})
    table = table[table["checkpoints"] > 0].fillna(0.0)
    table["mean_blocked_s"] = table["seconds"] / table["checkpoints"]
    table["max_blocked_s"] = table["mean_blocked_s"]
    table["total_blocked_h"] = table["seconds"] / 3600.0
    table["mean_write_gb"] = table["bytes"] / table["checkpoints"] / 1e9
    table["observed_write_gb_s"] = table["bytes"] / 1e9 / table["seconds"].where(table["seconds"] > 0)
    table["bandwidth_to_halve_gb_s"] = 2.0 * table["observed_write_gb_s"]
    return table[COLUMNS].assign(source="measured").reset_index(drop=True)


def combined(measured: pd.DataFrame, from_stalls: pd.DataFrame) -> pd.DataFrame:
    """The measured rows, and the stall estimates of the jobs without any."""
    known = set(map(tuple, measured[KEYS].to_numpy())) if not measured.empty else set()
    rest = from_stalls[[tuple(k) not in known for k in from_stalls[KEYS].to_numpy()]] if not from_stalls.empty \
        else from_stalls
    parts = [p for p in (measured, rest.assign(source="stalls")) if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*COLUMNS, "source"])


def stall_intervals(stalled: pd.DataFrame, step_s: float) -> pd.DataFrame:
    """Runs of consecutive samples with value 1 → one row per stall: cluster, job_id, start, end."""
    rows = []
    if stalled.empty:
        return pd.DataFrame(rows, columns=["cluster", "job_id", "start", "end"])
    for (cluster, job), part in stalled.sort_values("timestamp").groupby(["cluster", "job_id"]):
        on = part[part["value"] >= 0.5]["timestamp"].to_numpy()
        if len(on) == 0:
            continue
        breaks = [0] + [i for i in range(1, len(on)) if on[i] - on[i - 1] > step_s * 1.5] + [len(on)]
        for a, b in zip(breaks, breaks[1:]):
            # A stall seen on n consecutive samples lasted about n steps.
            rows.append({"cluster": cluster, "job_id": job, "start": on[a], "end": on[b - 1] + step_s})
    return pd.DataFrame(rows, columns=["cluster", "job_id", "start", "end"])


def checkpoint_cost(stalled: pd.DataFrame, write_rate: pd.DataFrame, step_s: float, window_s: float) -> pd.DataFrame:
    """Per (cluster, job_id): checkpoint count, blocked time and write bandwidth figures."""
    stalls = stall_intervals(stalled, step_s)
    if stalls.empty:
        return pd.DataFrame(columns=COLUMNS)
    rates = write_rate.sort_values("timestamp")
    stalls["blocked_s"] = stalls["end"] - stalls["start"]
    stalls["bytes"] = [_burst_bytes(rates, r.cluster, r.start - window_s, r.end + window_s, step_s)
                       for r in stalls.itertuples()]
    grouped = stalls.groupby(["cluster", "job_id"], as_index=False)
    table = grouped.agg(checkpoints=("blocked_s", "size"), mean_blocked_s=("blocked_s", "mean"),
                        max_blocked_s=("blocked_s", "max"), total_blocked_s=("blocked_s", "sum"),
                        mean_bytes=("bytes", "mean"))
    table["total_blocked_h"] = table.pop("total_blocked_s") / 3600.0
    table["mean_write_gb"] = table.pop("mean_bytes") / 1e9
    table["observed_write_gb_s"] = table["mean_write_gb"] / table["mean_blocked_s"]
    table["bandwidth_to_halve_gb_s"] = 2.0 * table["observed_write_gb_s"]
    return table[COLUMNS]


def _burst_bytes(rates: pd.DataFrame, cluster: str, lo: float, hi: float, step_s: float) -> float:
    """Integral of the write rate over [lo, hi): each rate sample stands for one step."""
    if rates.empty:
        return 0.0
    part = rates[(rates["cluster"] == cluster) & (rates["timestamp"] > lo) & (rates["timestamp"] <= hi)]
    return float(part["value"].sum() * step_s)
