"""Matplotlib figures for the report, each returned as a base64 PNG so the HTML stays self-contained."""
from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")  # headless: the report runs on servers and in CI
import matplotlib.pyplot as plt
import pandas as pd

from lockstep.analytics.report.tables import CAUSES


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def gpu_hours_plot(jobs: pd.DataFrame, top: int = 15) -> str | None:
    """Stacked bars per job: productive GPU-hours, then lost hours by cause."""
    if jobs.empty:
        return None
    top_jobs = jobs.nlargest(top, "allocated_gpu_h")
    labels = top_jobs["cluster"] + "/" + top_jobs["job_id"].astype(str)
    fig, ax = plt.subplots(figsize=(9, 4))
    bottom = top_jobs["productive_gpu_h"].to_numpy()
    ax.bar(labels, bottom, label="productive", color="#2e7d32")
    for cause in CAUSES:
        values = top_jobs[f"lost_{cause}_gpu_h"].to_numpy()
        if values.sum() > 0:
            ax.bar(labels, values, bottom=bottom, label=f"lost: {cause}")
            bottom = bottom + values
    ax.set_ylabel("GPU-hours")
    ax.set_title("GPU-hours by job")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=45)
    return _png(fig)


def ledger_plot(ledger: pd.DataFrame) -> str | None:
    """Per cluster, one bar of the ledger: productive, then each (kind, cause) lost, largest first."""
    if ledger.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    clusters = list(dict.fromkeys(ledger["cluster"]))
    bottom = pd.Series(0.0, index=clusters)
    for (kind, cause), part in ledger.groupby(["kind", "cause"], sort=False):
        values = part.set_index("cluster")["gpu_h"].reindex(clusters).fillna(0.0)
        if values.sum() > 0:
            ax.bar(clusters, values, bottom=bottom, label=kind + (f": {cause}" if cause else ""),
                   color="#2e7d32" if kind == "productive" else None)
            bottom = bottom + values
    ax.set_ylabel("GPU-hours")
    ax.set_title("Where GPU-hours went")
    ax.legend(fontsize=8)
    return _png(fig)


def rack_power_plot(racks: pd.DataFrame) -> str | None:
    """Peak rack power next to its breaker budget."""
    if racks.empty:
        return None
    racks = racks.sort_values(["cluster", "rack"])
    labels = racks["cluster"] + "/" + racks["rack"].astype(str)
    x = range(len(racks))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar([i - 0.2 for i in x], racks["peak_w"] / 1e3, width=0.4, label="peak", color="#c62828")
    ax.bar([i + 0.2 for i in x], racks["budget_w"].fillna(0) / 1e3, width=0.4, label="budget", color="#90a4ae")
    ax.set_xticks(list(x), labels, rotation=45)
    ax.set_ylabel("kW")
    ax.set_title("Rack peak power vs budget")
    ax.legend(fontsize=8)
    return _png(fig)


def daily_energy_plot(daily: pd.DataFrame) -> str | None:
    """kWh per rack per day."""
    if daily.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for rack in daily.columns:
        ax.plot(daily.index, daily[rack], marker=".", label=str(rack))
    ax.set_ylabel("kWh per day")
    ax.set_title("Energy per rack")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax.legend(fontsize=8)
    return _png(fig)


def fault_plot(faults: pd.DataFrame, top: int = 15) -> str | None:
    """The most recurring faults, by days with events."""
    if faults.empty:
        return None
    head = faults.head(top).iloc[::-1]
    labels = head["node"] + " " + head["component"] + " " + head["kind"]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(head) + 1.5))
    ax.barh(labels, head["days_with_events"], color="#ef6c00")
    ax.set_xlabel("days with events")
    ax.set_title("Recurring faults")
    return _png(fig)


def outlook_plot(series: pd.DataFrame, name: str) -> str | None:
    """Observed days, the forecast line and its interval, per cluster (demand) or rack (power)."""
    part = series[series["series"] == name]
    if part.empty:
        return None
    key = part["rack"].fillna("") if "rack" in part and part["rack"].notna().any() else part["cluster"]
    fig, ax = plt.subplots(figsize=(9, 4))
    for label, one in part.groupby(key):
        when = pd.to_datetime(one["date"])
        seen, ahead = one["observed"].notna(), one["forecast"].notna()
        line, = ax.plot(when[seen], one["observed"][seen], marker=".", label=f"{label} observed")
        ax.plot(when[ahead], one["forecast"][ahead], color=line.get_color(), linestyle="--")
        ax.fill_between(when[ahead], one["lo"][ahead], one["hi"][ahead], color=line.get_color(), alpha=0.2)
    ax.set_ylabel("GPU-hours per day" if name == "demand_gpu_h" else "peak W")
    ax.set_title("Demand and its 90-day forecast" if name == "demand_gpu_h" else "Rack peak power and its forecast")
    ax.tick_params(axis="x", rotation=45, labelsize=7)
    ax.legend(fontsize=8)
    return _png(fig)
