"""``lockstep report monthly``: range queries → tables → one HTML page + one CSV per table in OUT."""
from __future__ import annotations

import calendar
import csv
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from analytics.report import checkpoints, faults, html, plots, tables
from analytics.report.progress import Progress
from analytics.report.promrange import chunks, fetch
from analytics.report.queries import Steps, monthly_queries


@dataclass(frozen=True, slots=True)
class ReportConfig:
    prometheus_url: str
    month: str                      # YYYY-MM
    out: Path
    steps: Steps = Steps()
    cluster: str = "default"        # name for series without a `cluster` label (single Prometheus)
    teams: dict[str, str] | None = None


def month_range(month: str, now: float | None = None) -> tuple[float, float]:
    """``YYYY-MM`` → [first second, last evaluation point] in UTC, cut at ``now`` for the current month."""
    try:
        year, mon = (int(p) for p in month.split("-"))
        first = datetime(year, mon, 1, tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ValueError(f"--month {month!r}: expected YYYY-MM") from None
    end = first + calendar.monthrange(year, mon)[1] * 86400
    end = min(end, time.time() if now is None else now)
    if end <= first:
        raise ValueError(f"--month {month}: the month has not started yet")
    return first, end


def load_teams(path: Path) -> dict[str, str]:
    """CSV with header ``job_id,team`` (e.g. exported from sacct's account column)."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"job_id", "team"} <= set(reader.fieldnames):
            raise ValueError(f"{path}:1: header must contain job_id,team")
        return {row["job_id"]: row["team"] for row in reader}


def query_all(config: ReportConfig, start: float, end: float) -> dict[str, pd.DataFrame]:
    queries = monthly_queries(config.steps)
    total = sum(len(chunks(start, end, q.step_s)) for q in queries)
    bar = Progress(total)
    frames = {}
    for q in queries:
        frame = fetch(config.prometheus_url, q, start, end, on_chunk=lambda name=q.name: bar.tick(name))
        frames[q.name] = tables.with_cluster(frame, config.cluster)
    return frames


def build_sections(frames: dict[str, pd.DataFrame], config: ReportConfig, start: float,
                   end: float) -> list[html.Section]:
    c, f = config.steps.coarse_s, config.steps.fine_s
    alloc = frames["allocated"]
    # The last evaluation point is the month's end itself: each point stands for the step after it.
    alloc = alloc[alloc["timestamp"] < end] if not alloc.empty else alloc
    jobs = tables.gpu_hours(alloc, frames["lost"], c, config.teams, start) if not alloc.empty else pd.DataFrame()
    clusters = tables.rollup(jobs, "cluster") if not jobs.empty else pd.DataFrame()
    teams = tables.rollup(jobs, "team") if not jobs.empty else pd.DataFrame()
    # Window queries (…[1h:]) at the month's first second describe the previous month's last hour.
    peak, throttle = (frames[q][frames[q]["timestamp"] > start] for q in ("rack_peak", "throttle"))
    racks = tables.rack_energy(frames["energy"], peak, frames["budget"])
    ranking = faults.fault_ranking(frames["xid"], frames["ecc"], frames["flaps"], throttle, c, start)
    daily = tables.daily_energy(frames["energy"])
    ckpt = checkpoints.checkpoint_cost(frames["ckpt_stalled"], frames["write_rate"], f, config.steps.rate_window_s)
    return [
        html.Section("GPU-hours per cluster", "Allocated, productive and lost GPU-hours.", clusters,
                     "gpu_hours_by_cluster.csv"),
        html.Section("GPU-hours per job", "Lost hours by cause, from lockstep analytics.", jobs,
                     "gpu_hours_by_job.csv", plots.gpu_hours_plot(jobs)),
        html.Section("Imbalance", "GPU-hours spent waiting for GPUs that ran slower than their job's median "
                     "since they started (a heavier pipeline stage, skewed data, hardware slow before the job): "
                     "not counted as lost above, and no straggler.",
                     tables.imbalance(jobs, frames["imbalance"], frames["imbalance_ratio"], frames["imbalance_gpus"],
                                      start), "imbalance_by_job.csv"),
        html.Section("GPU-hours per team", "Teams from --teams, else the job's Slurm user.", teams, "gpu_hours_by_team.csv"),
        html.Section("Energy and peak power per rack", "Lowest headroom first.", racks, "rack_energy.csv",
                     plots.rack_power_plot(racks)),
        html.Section("Daily energy per rack", "kWh per UTC day.", daily.reset_index(), "rack_energy_daily.csv",
                     plots.daily_energy_plot(daily)),
        html.Section("Recurring faults", "Ranked by days with events, then event count.", ranking,
                     "recurring_faults.csv", plots.fault_plot(ranking)),
        html.Section("Checkpoint cost", "Time blocked per checkpoint; doubling the observed write bandwidth "
                     "halves it.", ckpt, "checkpoint_cost.csv"),
    ]


def write_report(config: ReportConfig) -> Path:
    start, end = month_range(config.month)
    frames = query_all(config, start, end)
    sections = build_sections(frames, config, start, end)
    config.out.mkdir(parents=True, exist_ok=True)
    for s in sections:
        s.table.to_csv(config.out / s.csv_name, index=False)
    span = f"{datetime.fromtimestamp(start, timezone.utc):%Y-%m-%d} to {datetime.fromtimestamp(end, timezone.utc):%Y-%m-%d %H:%M} UTC"
    page = html.render(f"lockstep capacity & power review {config.month}",
                       f"{span}; source {config.prometheus_url}", sections)
    path = config.out / f"report-{config.month}.html"
    path.write_text(page)
    return path
