"""Validation (variable ``node``, multi-valued): the latest run of each test per node with its status and age,
figures against their baselines (own history, peers, floor), all-reduce bus bandwidth per scale over time,
checks that did not pass (DCGM diagnostics per GPU, gpu-burn, fio jobs)."""
from __future__ import annotations

from lockstep.alerts.recording import VALIDATION_RATIO
from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards.config import Config, sel
from lockstep.dashboards.grafana import dashboard, query_variable, target
from lockstep.exporters.catalog import validation as v
from lockstep.exporters.catalog.enums import HISTORY, PEERS

NAME = "validation"
FIGURE = "node, kind, test, scale, subject, figure"
RUN = "node, kind, test, scale"
FAILED = 'status=~"fail|error|timeout"'


def runs(cfg: Config, *matchers: str):
    """Each test's latest run: its start time, labelled with its status (the GPU node dashboard shows it too)."""
    m = (cfg.selectors.node, *matchers)
    started = f"max by ({RUN}) ({sel(v.LAST_RUN, *m)})"
    with_status = f"{started} * on ({RUN}) group_left (status) max by ({RUN}, status) ({sel(v.STATUS, *m)})"
    return p.table("Latest validation runs", [target(f"{with_status} * 1000", instant=True, table=True)],
                   "dateTimeFromNow", columns={"node": "node", "kind": "tool", "test": "test", "scale": "nodes",
                                               "status": "status", "Value": "started"},
                   sort_by="started", w=12, h=9)


def _summary(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    return [
        p.stat("Runs failed or timed out", [target(q.count_or_zero(sel(v.STATUS, *n, FAILED)))], "none",
               thresholds=(("green", None), ("red", 1)), w=6),
        p.stat("Lowest figure vs a baseline", [target(f"min({sel(VALIDATION_RATIO, q.NODE)})")], "percentunit",
               thresholds=(("red", None), ("orange", 0.8), ("green", 0.9)), w=6),
        p.stat("Tests with a result", [target(f"count(count by ({RUN}) ({sel(v.STATUS, *n)}))")], "none", w=6),
        p.stat("Oldest latest run", [target(f"time() - min({sel(v.LAST_RUN, *n)})")], "s", w=6),
    ]


def _baselines(cfg: Config) -> list:
    history, peers = (sel(VALIDATION_RATIO, q.NODE, f'baseline="{b}"') for b in (HISTORY, PEERS))
    return [
        p.table("Figures against their baselines (latest run)", [
            target(f"min by ({FIGURE}) ({history})", instant=True, table=True),
            target(f"min by ({FIGURE}) ({peers})", instant=True, table=True),
            target(f"min by ({FIGURE}) ({sel(VALIDATION_RATIO, q.NODE)})", instant=True, table=True),
        ], "percentunit", columns={"node": "node", "kind": "tool", "test": "test", "scale": "nodes",
                                   "subject": "subject", "figure": "figure", "Value #A": "vs own history",
                                   "Value #B": "vs peers", "Value #C": "lowest (incl. floor)"},
            sort_by="lowest (incl. floor)", sort_desc=False, w=24, h=10),
    ]


def _history(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    allreduce = sel(v.BANDWIDTH, *n, 'kind="nccl"', 'test=~"all_reduce.*"', 'figure="avg_busbw"')
    history = sel(v.BANDWIDTH_BASELINE, *n, 'kind="nccl"', 'test=~"all_reduce.*"', 'figure="avg_busbw"')
    return [
        p.timeseries("All-reduce bus bandwidth per scale", [
            target(f"max by (node, scale) ({allreduce})", "{{node}} x{{scale}} nodes"),
            target(f"max by (node, scale) ({history})", "{{node}} x{{scale}} history baseline")], "Bps", w=12),
        p.timeseries("Bandwidth figures", [
            target(f"max by ({FIGURE}) ({sel(v.BANDWIDTH, *n)})", "{{node}} {{test}} {{subject}} {{figure}}")],
            "Bps", w=12),
    ]


def _checks(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    not_passed = sel(v.CHECK_STATUS, *n, 'status=~"fail|warn|skip"')
    return [
        runs(cfg, q.NODE),
        p.table("Checks that did not pass (failed diagnostics)", [target(not_passed, instant=True, table=True)],
                "none", columns={"node": "node", "kind": "tool", "test": "test", "check": "check",
                                 "subject": "GPU / job", "status": "status"}, w=12, h=9),
    ]


def build(cfg: Config):
    node = query_variable("node", "Node", f"label_values({sel(v.STATUS, cfg.selectors.node)}, node)",
                          include_all=True)
    return dashboard(cfg, NAME, "lockstep / Validation",
                     "Cluster validation runs (nccl-tests, perftest, DCGM diagnostics, fio, gpu-burn) from "
                     "`lockstep validate`: latest result per node against its baselines, history per scale, "
                     "failed checks.", [*_summary(cfg), *_baselines(cfg), *_history(cfg), *_checks(cfg)], [node])
