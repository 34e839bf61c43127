"""Cluster overview: GPU health, running jobs and their goodput, fleet activity, firing alerts,
fabric and storage at a glance, rack power against budget. Links into the job dashboard."""
from __future__ import annotations

from lockstep.alerts import recording as r
from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards.config import Config, rate, sel
from lockstep.dashboards.grafana import dashboard, data_link, target
from lockstep.exporters.catalog import analytics, fabric, fleet, gpu, health, storage

NAME = "overview"


def _health_stats(cfg: Config) -> list:
    n, a = cfg.selectors.node, cfg.selectors.analytics
    return [
        p.stat("GPUs healthy", [target(q.count_or_zero(q.gpus_healthy(cfg)))], "short"),
        p.stat("GPUs throttled", [target(q.count_or_zero(q.gpus_throttled(cfg)))], "short",
               thresholds=(("green", None), ("orange", 1))),
        p.stat("GPUs lost", [target(q.count_or_zero(f"{sel(gpu.UP, n)} == 0"))], "short", thresholds=p.OK_BAD),
        p.stat("GPUs failing a check", [target(q.count_or_zero(f"{sel(gpu.HEALTHY, n)} == 0"))], "short",
               thresholds=p.OK_BAD),
        # Per node: expected minus visible, never below 0 (a node may see more GPUs than configured).
        p.stat("GPUs missing", [target(f"sum(clamp_min({sel(gpu.GPUS_EXPECTED, n)} - {sel(gpu.GPUS_VISIBLE, n)}, 0))")],
               "short", thresholds=p.OK_BAD),
        p.stat("Jobs running", [target(f"count({r.JOB_GPUS})")], "short"),
        p.stat("Mean job goodput", [target(f"avg({sel(analytics.JOB_GOODPUT, a)})")], "percentunit",
               thresholds=(("red", None), ("orange", 0.8), ("green", 0.9))),
        p.stat("Collectors failing", [target(q.count_or_zero(f"{sel(health.SCRAPE_COLLECTOR_SUCCESS, n)} == 0"))],
               "short", thresholds=p.OK_BAD),
    ]


def _jobs_and_alerts(cfg: Config) -> list:
    a = cfg.selectors.analytics
    jobs = p.table("Jobs", [
        target(r.JOB_GPUS, instant=True, table=True),
        target(f"max by (job_id) ({sel(analytics.JOB_GOODPUT, a)})", instant=True, table=True),
        target(f"max by (job_id) ({sel(analytics.JOB_STALLED, a)})", instant=True, table=True),
    ], "short", columns={"job_id": "job", "Value #A": "GPUs", "Value #B": "goodput", "Value #C": "stalled"},
        links=[data_link(cfg, "Training job ${__data.fields.job}", "job", job_id="job")],
        overrides=[{"matcher": {"id": "byName", "options": "goodput"},
                    "properties": [{"id": "unit", "value": "percentunit"}]}])
    alerts = p.table("Firing alerts", [target('ALERTS{alertstate="firing"}', instant=True, table=True)], "short",
                     columns={"alertname": "alert", "severity": "severity", "job_id": "job", "node": "node",
                              "rail": "rail", "interface": "interface", "gpu": "gpu"})
    return [jobs, alerts]


def _fleet(cfg: Config) -> list:
    n = cfg.selectors.node
    activity = p.heatmap("Fleet GPU activity (SM active, mean per node)",
                         [target(f"avg by (node) ({sel(gpu.SM_ACTIVE, n)})", "{{node}}")], "percentunit", w=24, h=9)
    paused = q.by_interface_rail(cfg, r.PFC_PAUSED)
    ib = q.by_device_rail(cfg, f"{rate(cfg, fabric.IB_TRANSMIT_BYTES, n)} + {rate(cfg, fabric.IB_RECEIVE_BYTES, n)}")
    return [
        activity,
        p.timeseries("Fabric: throughput per rail", [target(f"sum by (rail) ({ib})", "rail {{rail}}")], "Bps", w=8),
        p.timeseries("Fabric: worst paused fraction per rail", [target(f"max by (rail) ({paused})", "rail {{rail}}")],
                     "percentunit", min=0, max=1, w=8),
        p.timeseries("Storage throughput", [
            target(f"sum by (fstype) ({rate(cfg, storage.READ_BYTES, n)})", "read {{fstype}}"),
            target(f"-sum by (fstype) ({rate(cfg, storage.WRITE_BYTES, n)})", "write {{fstype}}"),
        ], "Bps", w=8),
    ]


def _fleet_health(cfg: Config) -> list:
    """Is the fleet good: GPUs and nodes by state (the lockstep_fleet_* recording rules), what the next job
    can have, the GPUs degraded against their peers, and the nodes that keep coming back."""
    a, qr = cfg.selectors.analytics, cfg.selectors.quarantine
    week, month = 'window="7d"', 'window="30d"'
    states = p.table("GPUs and nodes by model and state", [
        target(f"sum by (model, state) ({r.FLEET_GPUS})", instant=True, table=True),
        target(f"sum by (model, state) ({r.FLEET_NODES})", instant=True, table=True),
    ], "short", columns={"model": "model", "state": "state", "Value #A": "GPUs", "Value #B": "nodes"}, w=12)
    peers = p.table("GPUs degraded against their peers", [
        target(f"max by (node, gpu, model) ({sel(fleet.PEER_OUTLIER_SCORE, a)})\nand on (node, gpu)\n"
               f"max by (node, gpu) ({sel(fleet.PEER_DEGRADED, a)}) == 1", instant=True, table=True),
    ], "short", columns={"node": "node", "gpu": "gpu", "model": "model", "Value": "robust units from peers"}, w=12)
    offenders = p.table("Top offenders (30 days)", [
        target(f"topk(10, {sel(fleet.NODE_DRAINS, qr, month)})", instant=True, table=True),
        # recorded hourly: the last hour's value
        target(f"topk(10, sum by (node) (last_over_time({r.FLEET_GPU_EVENTS}{{{month}}}[{r.FLEET_INTERVAL}])))",
               instant=True, table=True),
    ], "short", columns={"node": "node", "Value #A": "drains", "Value #B": "hardware events"}, w=12)
    history = p.timeseries("Repeat offenders: drains in the last 7 days", [
        target(f"{sel(fleet.NODE_DRAINS, qr, week)}\nand on (node) {sel(fleet.REPEAT_OFFENDER, qr)} == 1",
               "{{node}}")], "short", min=0, w=12)
    return [
        p.stat("GPUs by state", [target(f"sum by (state) ({r.FLEET_GPUS})", "{{state}}")], "short", w=6),
        p.stat("Nodes by state", [target(f"sum by (state) ({r.FLEET_NODES})", "{{state}}")], "short", w=6),
        p.stat("Free GPUs (healthy, no job)", [target(f"sum({r.FLEET_FREE_GPUS})")], "short", w=6),
        p.stat("Largest job that fits now (GPUs in free whole nodes)", [target(f"max({r.FLEET_JOB_CAPACITY})")],
               "short", w=6),
        states, peers, offenders, history,
    ]


def _power(cfg: Config) -> list:
    return [p.bargauge("Rack power vs breaker budget", [target(r.RACK_POWER_BUDGET, "{{rack}}")], "percentunit", max=1,
                       thresholds=(("green", None), ("orange", 0.85), ("red", 0.95)), w=24, h=6)]


def build(cfg: Config):
    panels = [*_health_stats(cfg), *_jobs_and_alerts(cfg), *_fleet(cfg), *_fleet_health(cfg), *_power(cfg)]
    return dashboard(cfg, NAME, "lockstep / Cluster overview",
                     "GPU health, jobs and goodput, fleet activity, firing alerts, fabric, storage, rack power.",
                     panels)
