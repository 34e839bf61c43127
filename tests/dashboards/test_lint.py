"""Lint rules (grafana/dashboard-linter spirit) pass on every generated dashboard, and each rule
fires on a dashboard broken the way it guards against; the PromQL reader finds metric names."""
from __future__ import annotations

import copy

import pytest
import yaml

from lockstep.alerts import config as alerts_config
from lockstep.alerts import rules
from lockstep.dashboards import lint
from lockstep.dashboards.build import build_all
from lockstep.dashboards.check import without_zero_fallback
from lockstep.dashboards.promql import grafana_variables, metric_names, substitute, variable_metric_names
from lockstep.exporters.catalog import CATALOG

DASHBOARDS = build_all()
# The series the alerts' rule file records: what a dashboard may name besides the catalog's metrics.
RECORDED = {r["record"] for g in yaml.safe_load(rules.render(alerts_config.load(None)))["groups"]
            for r in g["rules"] if "record" in r}
KNOWN = set(CATALOG) | RECORDED


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_generated_dashboard_is_clean(name):
    assert lint.lint(DASHBOARDS[name], KNOWN) == []


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_metric_comes_from_the_catalog_or_the_recording_rules(name):
    names = {m for p in DASHBOARDS[name]["panels"] for t in p["targets"] for m in metric_names(t["expr"])}
    names |= {m for v in DASHBOARDS[name]["templating"]["list"][1:] for m in variable_metric_names(v["query"])}
    assert names and names - lint.BUILTIN_METRICS <= KNOWN
    assert {n for n in names if ":" in n} <= RECORDED


def broken(mutate) -> dict:
    d = copy.deepcopy(DASHBOARDS["lockstep-job.json"])
    mutate(d)
    return d


def first_target(d: dict) -> dict:
    return d["panels"][0]["targets"][0]


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["panels"][1].update(datasource="Prometheus"), "panel 2 'Goodput': datasource Prometheus"),
    (lambda d: first_target(d).update(datasource={"uid": "abc"}), "target A: datasource {'uid': 'abc'}"),
    (lambda d: d["templating"]["list"].pop(0), "the first variable must be a Prometheus datasource variable"),
    (lambda d: d["templating"]["list"][1].update(datasource=None), "variable job_id: datasource None"),
], ids=["panel", "target", "no-variable", "variable"])
def test_datasource_rule(mutate, expected):
    assert any(expected in problem for problem in lint.check_datasource(broken(mutate)))


def test_units_panel_types_and_queries():
    def mutate(d):
        d["panels"][0]["fieldConfig"]["defaults"]["unit"] = ""
        d["panels"][1]["type"] = "graph"
        d["panels"][2]["targets"] = []
    assert lint.check_panels(broken(mutate)) == [
        "panel 1 'GPUs allocated': no unit",
        "panel 2 'Goodput': panel type 'graph' is not one of "
        "('timeseries', 'stat', 'table', 'bargauge', 'state-timeline', 'heatmap')",
        "panel 3 'Stalled now': no queries"]


@pytest.mark.parametrize("expr, ok", [
    ("rate(x[$__rate_interval])", True),
    ("sum(rate(x{a=\"[1]\"}[$__rate_interval])) / 3", True),
    ("avg_over_time((sum(rate(x[$__rate_interval])))[$__range:$__interval])", True),
    ("rate(x[5m])", False),
    ("increase(x[$__range])", False),
    ("irate(x[$__interval])", False),
    ("sum(rate(x[1m])) + rate(y[$__rate_interval])", False),
])
def test_rate_interval_rule(expr, ok):
    d = broken(lambda d: first_target(d).update(expr=expr))
    assert (lint.check_rate_intervals(d) == []) == ok


def test_layout_rule():
    def mutate(d):
        d["panels"][1]["id"] = d["panels"][0]["id"]
        d["panels"][2]["gridPos"] = {"h": 4, "w": 25, "x": 0, "y": 0}
        d["panels"][3]["gridPos"] = dict(d["panels"][0]["gridPos"], x=2)
    problems = lint.check_layout(broken(mutate))
    assert problems == [
        "panel 1 'Goodput': id 1 is missing, not positive or duplicated",
        "panel 3 'Stalled now': invalid gridPos {'h': 4, 'w': 25, 'x': 0, 'y': 0}",
        "panel 4 'Lost GPU-hours (range)': overlaps panel 1 'GPUs allocated'"]


def test_identity_rule():
    def mutate(d):
        d["uid"] = "Job Dashboard"
        d["links"][0]["keepTime"] = False
        ranking = next(p for p in d["panels"] if p["title"] == "Straggler ranking")
        ranking["fieldConfig"]["defaults"]["links"][0]["url"] = "/d/lockstep-node/node?var-node=x"
    assert lint.check_identity(broken(mutate)) == [
        "uid 'Job Dashboard' is missing or malformed",
        "no dashboard link that keeps the time range and the variables",
        "panel 7 'Straggler ranking': data link 'GPU node ${__data.fields.node}' drops the time range"]


def test_variables_rule():
    d = broken(lambda d: first_target(d).update(expr='up{node="$nodename", job_id="${job_id}"}'))
    assert lint.check_variables(d) == ["panel 1 'GPUs allocated' target A: undefined variable $nodename"]


def test_metrics_rule():
    def mutate(d):
        first_target(d).update(expr="sum(rate(lockstep_gpu_made_up_total[$__rate_interval])) / lockstep:made_up:ratio")
        d["templating"]["list"][1]["query"] = "label_values(lockstep_job_info, job_id)"
    assert lint.check_metrics(broken(mutate), KNOWN) == [
        "panel 1 'GPUs allocated' target A: unknown metric lockstep:made_up:ratio",
        "panel 1 'GPUs allocated' target A: unknown metric lockstep_gpu_made_up_total",
        "variable job_id: unknown metric lockstep_job_info"]


def test_variable_metric_names():
    assert variable_metric_names('label_values(lockstep_gpu_info{job="x"}, node)') == {"lockstep_gpu_info"}
    assert variable_metric_names("query_result(topk(3, y))") == {"y"}


@pytest.mark.parametrize("expr, names", [
    ('sum by (node, gpu) (rate(a_total{x="b_c"}[$__rate_interval])) * on(node) group_left(job_id) c_info',
     {"a_total", "c_info"}),
    ("topk(20, max by (gpu) (x)) > bool 0.5e3 or vector(0)", {"x"}),
    ("avg_over_time((count(y))[$__range:$__interval]) * $__range_s / 3600", {"y"}),
    ('ALERTS{alertstate="firing"} unless ignoring(severity) z', {"ALERTS", "z"}),
    ("-sum without (le) (histogram_quantile(0.9, w)) / 1e9", {"w"}),
])
def test_metric_names(expr, names):
    assert metric_names(expr) == names


def test_substitute_and_variables():
    expr = 'x{a="$job_id", b=~"${node:regex}"}[$__rate_interval] * $__range_s / $__range'
    assert grafana_variables(expr) == {"job_id", "node", "__rate_interval", "__range_s", "__range"}
    values = {"job_id": "4242", "node": "node0.", "instance": ".*", "__rate_interval": "1m", "__range_s": "1800",
              "__range": "30m"}
    assert substitute(expr, values) == 'x{a="4242", b=~"node0."}[1m] * 1800 / 30m'
    with pytest.raises(KeyError, match=r"\$job_id"):
        substitute(expr, {})


def test_zero_fallback_is_stripped_only_at_the_end():
    assert without_zero_fallback("count(x == 0) or vector(0)") == "count(x == 0)"
    assert without_zero_fallback("(a or vector(0)) + b") == "(a or vector(0)) + b"
