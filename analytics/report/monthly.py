"""``lockstep report monthly``: range queries → tables → one HTML page + one CSV per table in OUT."""
from __future__ import annotations

import calendar
import csv
import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lockstep.analytics.prom.answersize import REPORT_DEFAULT
from lockstep.analytics.prom.auth import PromAuth, check_url
from lockstep.analytics.report import checkpoints, coverage, faults, fit, html, outlook, plots, priors, tables
from lockstep.analytics.report.client import PromClient
from lockstep.analytics.report.progress import Progress
from lockstep.analytics.report.promrange import chunks, fetch
from lockstep.analytics.report.queries import Steps, monthly_queries


@dataclass(frozen=True, slots=True)
class ReportConfig:
    prometheus_url: str
    month: str                      # YYYY-MM
    out: Path
    steps: Steps = Steps()
    cluster: str = "default"        # name for series without a `cluster` label (single Prometheus)
    teams: dict[str, str] | None = None
    auth: PromAuth = PromAuth()     # how requests to prometheus_url authenticate
    max_answer_bytes: int = REPORT_DEFAULT   # of one Prometheus answer, decompressed (lockstep.analytics.prom.answersize)

    def __post_init__(self) -> None:
        check_url(self.prometheus_url, self.auth)


def month_range(month: str, now: float | None = None) -> tuple[float, float]:
    """``YYYY-MM`` → [first second, last evaluation point] in UTC, cut at ``now`` for the current month."""
    first, month_end = month_bounds(month)
    end = min(month_end, time.time() if now is None else now)
    if end <= first:
        raise ValueError(f"--month {month}: the month has not started yet")
    return first, end


def month_bounds(month: str) -> tuple[float, float]:
    """``YYYY-MM`` → its first second and the first second of the next month, UTC."""
    try:
        year, mon = (int(p) for p in month.split("-"))
        first = datetime(year, mon, 1, tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ValueError(f"--month {month!r}: expected YYYY-MM") from None
    return first, first + calendar.monthrange(year, mon)[1] * 86400


def load_teams(path: Path) -> dict[str, str]:
    """CSV with header ``job_id,team`` (e.g. exported from sacct's account column)."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"job_id", "team"} <= set(reader.fieldnames):
            raise ValueError(f"{path}:1: header must contain job_id,team")
        return {row["job_id"]: row["team"] for row in reader}


def query_all(config: ReportConfig, client: PromClient, start: float, end: float) -> dict[str, pd.DataFrame]:
    queries = monthly_queries(config.steps)
    total = sum(len(chunks(start, end, q)) for q in queries)
    bar = Progress(total)
    frames = {}
    for q in queries:
        frame = fetch(client, q, start, end, on_chunk=lambda name=q.name: bar.tick(name))
        frames[q.name] = tables.with_cluster(frame, config.cluster)
    return frames


def build_sections(frames: dict[str, pd.DataFrame], config: ReportConfig, start: float,
                   end: float, born_after: float | None = None) -> list[html.Section]:
    """``born_after``: counters first seen later started inside the range (default ``start``)."""
    c, f = config.steps.coarse_s, config.steps.fine_s
    born = start if born_after is None else born_after
    alloc = frames["allocated"]
    # The last evaluation point is the month's end itself: each point stands for the step after it.
    alloc = alloc[alloc["timestamp"] < end] if not alloc.empty else alloc
    jobs = tables.gpu_hours(alloc, frames["lost"], c, config.teams, born) if not alloc.empty else pd.DataFrame()
    clusters = tables.rollup(jobs, "cluster") if not jobs.empty else pd.DataFrame()
    teams = tables.rollup(jobs, "team") if not jobs.empty else pd.DataFrame()
    # Window queries (…[1h:]) at the month's first second describe the previous month's last hour.
    peak, throttle = (frames[q][frames[q]["timestamp"] > start] for q in ("rack_peak", "throttle"))
    racks = tables.rack_energy(frames["energy"], peak, frames["budget"])
    ranking = faults.fault_ranking(frames["xid"], frames["ecc"], frames["flaps"], throttle, c, born)
    daily = tables.daily_energy(frames["energy"])
    ckpt = checkpoints.combined(
        checkpoints.measured_cost(frames["ckpt_count"], frames["ckpt_seconds"], frames["ckpt_bytes"], born),
        checkpoints.checkpoint_cost(frames["ckpt_stalled"], frames["write_rate"], f, config.steps.burst_margin_s))
    ledger = tables.ledger(frames["ledger"], born)
    return [*_base_sections(frames, jobs, clusters, teams, racks, daily, ranking, ckpt, ledger, born),
            *outlook_sections(frames, c, end, born)]


def _base_sections(frames, jobs, clusters, teams, racks, daily, ranking, ckpt, ledger, born) -> list[html.Section]:
    return [
        html.Section("GPU-hours per cluster", "Allocated, productive and lost GPU-hours.", clusters,
                     "gpu_hours_by_cluster.csv"),
        html.Section("GPU-hours per job", "Lost hours by cause, from lockstep analytics.", jobs,
                     "gpu_hours_by_job.csv", plots.gpu_hours_plot(jobs)),
        html.Section("Imbalance", "GPU-hours spent waiting for GPUs that ran slower than their job's median "
                     "since they started (a heavier pipeline stage, skewed data, hardware slow before the job): "
                     "not counted as lost above, and no straggler.",
                     tables.imbalance(jobs, frames["imbalance"], frames["imbalance_ratio"], frames["imbalance_gpus"],
                                      born), "imbalance_by_job.csv"),
        html.Section("Where GPU-hours went", "The goodput ledger: every GPU-hour the analytics service accounted, "
                     "productive or lost to exactly one kind (stall, checkpoint, straggler, imbalance, job-wide "
                     "slowdown, idle allocation) and cause, per cluster.", ledger, "gpu_hours_ledger.csv",
                     plots.ledger_plot(ledger)),
        html.Section("GPU-hours per team", "Teams from --teams, else the job's Slurm user.", teams, "gpu_hours_by_team.csv"),
        html.Section("Energy and peak power per rack", "Lowest headroom first.", racks, "rack_energy.csv",
                     plots.rack_power_plot(racks)),
        html.Section("Daily energy per rack", "kWh per UTC day; a partial day has fewer than 24 hours of data.",
                     daily.join(tables.daily_hours(frames["energy"])).reset_index(), "rack_energy_daily.csv",
                     plots.daily_energy_plot(daily)),
        html.Section("Recurring faults", "Ranked by days with events, then event count.", ranking,
                     "recurring_faults.csv", plots.fault_plot(ranking)),
        html.Section("Checkpoint cost", "Time each checkpoint took to write, as the analytics service measured it "
                     "(source measured; else estimated from its checkpoint stalls); doubling the observed write "
                     "bandwidth halves it.", ckpt, "checkpoint_cost.csv"),
    ]


def outlook_sections(frames: dict[str, pd.DataFrame], step_s: float, end: float, born: float) -> list[html.Section]:
    """Demand, failures and rack power ahead: trends and 90-day forecasts from the month's whole days."""
    days = outlook.whole_days([frames["gpus"], frames["allocated"], frames["rack_peak"]], step_s, end)
    gpus = frames["gpus"]
    demand_daily = outlook.daily_demand(frames["allocated"][frames["allocated"]["timestamp"] < end]
                                        if not frames["allocated"].empty else frames["allocated"], days, step_s)
    demand = outlook.demand(demand_daily, gpus)
    peak_daily = outlook.daily_peak(frames["rack_peak"], days, step_s)
    power = outlook.power(peak_daily, frames["budget"])
    clusters = sorted(set(gpus["cluster"]) | set(demand_daily["cluster"])) if not gpus.empty else \
        sorted(set(demand_daily["cluster"]))
    failures = outlook.failures(outlook.failure_events(frames["xid"], frames["flaps"], born), gpus, clusters, days)
    series = pd.concat([outlook.daily_frame(demand, demand_daily, ["cluster"]).assign(series="demand_gpu_h"),
                        outlook.daily_frame(power, peak_daily, ["cluster", "rack"]).assign(series="rack_peak_w")],
                       ignore_index=True)
    how = ("Trend: a straight line through the whole UTC days; forecast 90 days on with a 90 % interval from a "
           "residual bootstrap (analytics/report/forecast.py); backtest: the same forecast from all but the last "
           "week against that week (mean absolute error, share of days inside the interval).")
    return [
        html.Section("Demand ahead", "Allocated GPU-hours per day, the trend (per day, with its interval), the "
                     "forecast for the 90th day and when demand fills the GPUs seen at that trend. " + how,
                     demand.drop(columns="_forecast"), "demand_forecast.csv", plots.outlook_plot(series, "demand_gpu_h")),
        html.Section("Rack power ahead", "Each rack's daily peak power, its trend and forecast, and when the peak "
                     "reaches the rack's budget at that trend (earliest: at the interval's top).",
                     power.drop(columns="_forecast"), "power_forecast.csv", plots.outlook_plot(series, "rack_peak_w")),
        html.Section("Failures against field priors", "Hardware XIDs (GPU memory ones apart) and InfiniBand links "
                     "that went down, per 1,000 GPU-days of the GPUs seen, beside the published rates below; the "
                     "trend of daily events and the events expected in the next 90 days.", failures,
                     "failure_forecast.csv"),
        html.Section("Field priors", f"Job interruptions by cause in {priors.SOURCE}, per 1,000 GPU-days.",
                     priors.table(), "field_priors.csv"),
        html.Section("Forecast series", "Observed and forecast values per day, for other tools.", series,
                     "forecast_daily.csv"),
    ]


def write_report(config: ReportConfig) -> Path:
    """Find where the month's data lies, query it at steps that suit it, write the CSVs and the page."""
    start, end = month_range(config.month)
    with PromClient(config.prometheus_url, config.auth, config.max_answer_bytes) as client:
        found = coverage.probe(client, start, end)
        config = dataclasses.replace(config, steps=fit.adapt(config.steps, found) if found else config.steps)
        frames = query_all(config, client, fit.query_start(start, found, config.steps), end)
    sections = build_sections(frames, config, start, end, fit.born_after(start, found, config.steps, frames))
    covered = fit.summary(found, start, end, month_bounds(config.month)[1], config.steps)
    config.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([covered]).to_csv(config.out / "coverage.csv", index=False)
    for s in sections:
        s.table.to_csv(config.out / s.csv_name, index=False)
    first, last = datetime.fromtimestamp(start, timezone.utc), datetime.fromtimestamp(end, timezone.utc)
    span = f"{first:%Y-%m-%d} to {last:%Y-%m-%d %H:%M} UTC"
    page = html.render(f"lockstep capacity & power review {config.month}",
                       f"{span}; source {config.prometheus_url}. {fit.describe(covered)}", sections)
    path = config.out / f"report-{config.month}.html"
    path.write_text(page)
    return path
