"""Every panel query runs on a real Prometheus (Debian's binary): none may return an error.

Grafana is not installed here, so this is how the dashboards meet a real PromQL engine: each
target with its variables substituted, as the instant or range query Grafana would send.
"""
from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.alerts import config as alerts_config
from lockstep.alerts import recording
from lockstep.analytics.evaluation.simframe import score_frame
from lockstep.analytics.scoring.stall import CAUSES
from lockstep.dashboards import check
from lockstep.dashboards.build import build_all
from lockstep.dashboards.promql import metric_names
from lockstep.exporters.catalog import analytics as A
from lockstep.simulator.scenario import load_scenario
from lockstep.simulator.series import series_frame
from lockstep.stack import Stack, start_prometheus
from tests.helpers import validation_results
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration

VALUES = {"datasource": "prometheus", "job_id": "4242", "node": "node05", "instance": ".*", "rail": ".*", "system": ".*",
          "__rate_interval": "1m", "__interval": "15s", "__range": "30m", "__range_s": "1800"}


def test_every_panel_query_is_accepted_by_prometheus(tmp_path, stack):
    prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, tmp_path))
    dashboards = build_all()
    queries = list(check.panel_queries(dashboards, VALUES))
    assert {q.dashboard for q in queries} == set(dashboards)
    end = time.time()
    errors = []
    for q in queries:
        try:
            check.run(prom.url, q, end - 1800, end, 15)
        except RuntimeError as exc:
            errors.append(str(exc))
    assert errors == []


def test_a_broken_query_is_reported_with_prometheus_message(tmp_path, stack):
    prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, tmp_path))
    q = check.PanelQuery("d", "p", "A", "sum(rate(x[1m]) * on(node) group_left y", instant=False)
    with pytest.raises(RuntimeError, match="d / p / A: .*parse error"):
        check.run(prom.url, q, time.time() - 60, time.time(), 15)


# --- the same queries on a Prometheus filled from the simulator ---------------------------------

SCENARIO = FIXTURES / "dashboards" / "every-fault.yaml"
# What Grafana would substitute for the scenario's 15-minute window; node and rail as regexes (the
# multi-value "All" form) so one pass covers the nodes where the faults are.
SIM_VALUES = {**VALUES, "node": "node0[0-3]", "__range": "900s", "__range_s": "900", "__rate_interval": "20s"}


def analytics_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """What ``lockstep analytics serve`` would have exported at every sample of the run, from the
    same pure scorer it runs (``lockstep.analytics.scoring.score.score_frame``), as series-frame rows: straggler
    score and flag per GPU, stalled per cause, cumulative lost GPU-seconds per cause, cumulative
    allocated GPU-seconds, goodput, imbalance (GPU-seconds waited, each imbalanced GPU's ratio)."""
    records = []
    for job, res in score_frame(frame).items():
        rows = []
        period = float(res.times[1] - res.times[0])
        for j, (_, node, gpu) in enumerate(res.columns):
            rows += [(t, A.STRAGGLER_SCORE.name, node, {"gpu": gpu}, v) for t, v in zip(res.times, res.stragglers.scores[:, j])]
            rows += [(t, A.STRAGGLER_FLAGGED.name, node, {"gpu": gpu}, float(v))
                     for t, v in zip(res.times, res.stragglers.flagged[:, j])]
        for cause in CAUSES:
            rows += [(t, A.JOB_STALLED.name, "", {"cause": cause}, float(c == cause)) for t, c in zip(res.times, res.causes)]
        total = np.zeros(len(res.times))
        for cause, lost in res.lost.items():
            total += np.cumsum(lost)
            rows += [(t, A.JOB_LOST_GPU_SECONDS.name, "", {"cause": cause}, v) for t, v in zip(res.times, np.cumsum(lost))]
        allocated = period * len(res.columns) * np.arange(1, len(res.times) + 1)
        rows += [(t, A.JOB_GOODPUT.name, "", {}, v) for t, v in zip(res.times, 1 - total / allocated)]
        rows += [(t, A.JOB_ALLOCATED_GPU_SECONDS.name, "", {}, v) for t, v in zip(res.times, allocated)]
        rows += [(t, A.JOB_IMBALANCE_LOST_GPU_SECONDS.name, "", {}, v)
                 for t, v in zip(res.times, np.cumsum(res.imbalance_lost))]
        rows += [(t, A.JOB_IMBALANCE_RATIO.name, r["node"], {"gpu": r["gpu"]}, r["ratio"])
                 for r in res.imbalance["ranks"] for t in res.times]
        records += [{"timestamp": t, "metric": m, "node": n, "job_id": job, **labels, "value": v}
                    for t, m, n, labels, v in rows]
    return pd.DataFrame(records)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """(Prometheus URL, start, end, metrics and recorded series it holds) for the every-fault scenario,
    with the alerts' recording rules evaluated over it as a live Prometheus would have."""
    workdir = tmp_path_factory.mktemp("dash-sim")
    frame = series_frame(load_scenario(SCENARIO))
    nodes = sorted(n for n in frame["node"].unique() if n)
    validation_results.fill(workdir / "validation", nodes, degraded=nodes[2], failing=nodes[1])
    every_minute = sorted(frame["timestamp"].unique())[::12]
    frame = pd.concat([frame, analytics_frame(frame),
                       validation_results.frame_rows(workdir / "validation", nodes, every_minute)], ignore_index=True)
    labels = [c for c in frame.columns if c not in ("timestamp", "value")]
    frame[labels] = frame[labels].astype(str).where(frame[labels].notna(), "")
    localcluster.backfill(frame, workdir)  # each metric under the scrape job that serves it live
    start, end = float(frame["timestamp"].min()), float(frame["timestamp"].max())
    localcluster.backfill_rules(recording.groups(alerts_config.load(None)), workdir, start, end)
    with Stack() as s:
        prom = s.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, workdir))
        yield prom.url, start, end, set(frame["metric"].unique()) | check.present_metrics(prom.url, end, since=start)


def test_panel_queries_on_simulated_data(simulated):
    """No query errors on real data (joins that are ambiguous only fail then), and every query
    whose metrics the simulated series holds returns data on this scenario."""
    url, start, end, present = simulated
    queries = list(check.panel_queries(build_all(), SIM_VALUES))
    empty, absent = check.data_check(url, queries, start, end, 15, present)
    assert empty == []
    recorded = {name for q in queries for name in metric_names(q.expr) if ":" in name}
    assert recorded and not recorded & absent, f"recorded series missing: {sorted(recorded & absent)}"
    if absent:
        warnings.warn(f"not in the simulated series (see tests/dashboards/test_live.py): {sorted(absent)}", stacklevel=1)


def test_panels_show_the_scenario_faults(simulated):
    """Spot checks against the scenario file: the throttled GPU, the lost GPU, the allocation."""
    url, start, end, _ = simulated
    queries = {(q.dashboard, q.panel, q.ref): q for q in check.panel_queries(build_all(), SIM_VALUES)}

    def values(dashboard: str, panel: str, at: float, ref: str = "A") -> list[tuple[dict, float]]:
        q = dataclasses.replace(queries[(f"lockstep-{dashboard}.json", panel, ref)], instant=True)
        return [(r["metric"], float(r["value"][1])) for r in check.run(url, q, start, at, 15)]

    throttled = start + 200  # gpu_throttle node01/3 from 60 s to 400 s
    assert values("overview", "GPUs throttled", throttled) == [({}, 1.0)]
    assert values("overview", "GPUs lost", end) == [({}, 1.0)]  # XID 79 on node00/6 at 700 s
    reasons = values("node", "Clock-event reasons", throttled)
    assert {(m["node"], m["gpu"]) for m, _ in reasons} == {("node01", "3")}
    assert values("job", "GPUs allocated", throttled) == [({}, 32.0)]  # 4 nodes x 8 GPUs
