"""Recurring-fault ranking: which nodes and components keep failing (XIDs, ECC, link flaps, throttling).

"Recurring" is measured in distinct UTC days with at least one event, so a burst of 500 ECC errors in
one minute ranks below a GPU that throws an XID every other day.
"""
from __future__ import annotations

import pandas as pd

from lockstep.analytics.report.tables import point_increases

COLUMNS = ["cluster", "node", "component", "kind", "events", "days_with_events"]


def _days(seconds: pd.Series) -> pd.Series:
    return pd.to_datetime(seconds, unit="s", utc=True).dt.strftime("%Y-%m-%d")


def _counter_events(frame: pd.DataFrame, kind, start: float | None, component: pd.Series | None = None) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    inc = point_increases(frame, start)
    inc = inc[inc["increase"] > 0].copy()
    if inc.empty:
        return pd.DataFrame(columns=COLUMNS)
    inc["day"] = _days(inc["since"])    # it happened in (since, timestamp]: 00:00 closes the day before
    inc["component"] = component.loc[inc.index] if component is not None else "gpu " + inc["gpu"].astype(str)
    inc["kind"] = kind(inc) if callable(kind) else kind
    grouped = inc.groupby(["cluster", "node", "component", "kind"], as_index=False)
    return grouped.agg(events=("increase", "sum"), days_with_events=("day", "nunique"))


def _throttle(frame: pd.DataFrame, step_s: float) -> pd.DataFrame:
    """``frame`` holds the throttled fraction of each step per GPU; events = hours throttled."""
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    hot = frame[frame["value"] > 0].copy()
    hot["hours"] = hot["value"] * step_s / 3600.0
    hot["day"] = _days(hot["timestamp"] - step_s)   # each value is the average over the step before it
    hot["component"] = "gpu " + hot["gpu"].astype(str)
    hot["kind"] = "throttling (h)"
    grouped = hot.groupby(["cluster", "node", "component", "kind"], as_index=False)
    return grouped.agg(events=("hours", "sum"), days_with_events=("day", "nunique"))


def fault_ranking(xid: pd.DataFrame, ecc: pd.DataFrame, flaps: pd.DataFrame, throttle: pd.DataFrame,
                  step_s: float, start: float | None = None) -> pd.DataFrame:
    """One row per (node, component, kind), most recurring first."""
    parts = [
        _counter_events(xid, lambda f: "xid " + f["xid"].astype(str), start),
        _counter_events(ecc, lambda f: "ecc " + f["type"].astype(str), start),
        _counter_events(flaps, "link flap", start,
                        None if flaps.empty else flaps["device"].astype(str) + " port " + flaps["port"].astype(str)),
        _throttle(throttle, step_s),
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    table = pd.concat(parts, ignore_index=True)
    table = table.sort_values(["days_with_events", "events"], ascending=False).reset_index(drop=True)
    table.insert(0, "rank", range(1, len(table) + 1))
    return table
