"""Dashboards: the committed JSON is the generated JSON, the CLI writes it, the provisioning files
point at it, and the seven dashboards have the variables and links the issue asks for."""
from __future__ import annotations

import json

import pytest
import yaml

from lockstep.cli import main
from lockstep.dashboards import job
from lockstep.dashboards.build import build_all
from lockstep.dashboards.grafana import DATASOURCE, to_text
from lockstep.exporters.catalog import enums
from tests.helpers.paths import REPO

DEPLOY = REPO / "deploy" / "grafana"
EXPECTED = {  # uid -> (title, variables after the datasource)
    "lockstep-overview": ("lockstep / Cluster overview", []),
    "lockstep-job": ("lockstep / Training job", ["job_id"]),
    "lockstep-node": ("lockstep / GPU node", ["node", "instance"]),
    "lockstep-fabric": ("lockstep / Fabric", ["node", "rail"]),
    "lockstep-storage": ("lockstep / Storage", ["node", "system"]),
    "lockstep-power": ("lockstep / Power & capacity", []),
    "lockstep-validation": ("lockstep / Validation", ["node"]),
}


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    return build_all()


def test_committed_json_is_the_generated_json(dashboards):
    committed = sorted(p.name for p in (DEPLOY / "dashboards").glob("*.json"))
    assert committed == sorted(dashboards), "deploy/grafana/dashboards has stale or missing files"
    for name, data in dashboards.items():
        assert (DEPLOY / "dashboards" / name).read_text() == to_text(data), (
            f"{name} is stale: run `lockstep dashboards build --out deploy/grafana/dashboards`")


def test_cli_build_writes_every_dashboard(tmp_path, capsys):
    assert main(["dashboards", "build", "--out", str(tmp_path / "out")]) == 0
    for name in EXPECTED:
        written = tmp_path / "out" / f"{name}.json"
        assert written.read_text() == (DEPLOY / "dashboards" / f"{name}.json").read_text()
    assert str(tmp_path / "out" / "lockstep-job.json") in capsys.readouterr().out


def test_cli_build_without_subcommand_is_a_usage_error(capsys):
    assert main(["dashboards"]) == 2
    assert "build --out" in capsys.readouterr().err


def test_output_is_deterministic():
    first, second = build_all(), build_all()
    assert {k: to_text(v) for k, v in first.items()} == {k: to_text(v) for k, v in second.items()}
    text = to_text(first["lockstep-job.json"])
    assert json.loads(text) == first["lockstep-job.json"] and text.endswith("}\n")


def test_seven_dashboards_with_stable_uids_titles_and_variables(dashboards):
    assert {d["uid"]: (d["title"], [v["name"] for v in d["templating"]["list"][1:]])
            for d in dashboards.values()} == EXPECTED


def test_variables_are_filled_from_the_templated_datasource(dashboards):
    job = dashboards["lockstep-job.json"]["templating"]["list"][1]
    assert job["datasource"] == DATASOURCE == {"type": "prometheus", "uid": "${datasource}"}
    assert job["query"] == 'label_values(lockstep_gpu_job_info{job="lockstep-node"}, job_id)'
    rail = dashboards["lockstep-fabric.json"]["templating"]["list"][2]
    assert rail["query"] == 'label_values(lockstep_fabric_rail_info{job="lockstep-node"}, rail)'
    assert rail["includeAll"] and rail["allValue"] == ".*"


def test_links_carry_time_range_and_variables(dashboards):
    for d in dashboards.values():
        assert (d["links"][0]["type"], d["links"][0]["tags"]) == ("dashboards", ["lockstep"])
        assert d["links"][0]["keepTime"] and d["links"][0]["includeVars"]
    ranking = next(p for p in dashboards["lockstep-job.json"]["panels"] if p["title"] == "Straggler ranking")
    assert ranking["fieldConfig"]["defaults"]["links"] == [{
        "title": "GPU node ${__data.fields.node}",
        "url": "/d/lockstep-node/node?${__url_time_range}&${datasource:queryparam}&var-node=${__data.fields.node}"}]


def test_job_panels_join_gpus_to_the_job_through_job_info(dashboards):
    heatmap = next(p for p in dashboards["lockstep-job.json"]["panels"] if p["type"] == "heatmap")
    assert heatmap["targets"][0]["expr"] == (
        '(lockstep_gpu_sm_active_ratio{job="lockstep-node"}) * on(node, gpu) group_left(job_id) '
        'max by (node, gpu, job_id) (lockstep_gpu_job_info{job="lockstep-node", job_id="$job_id"})')
    assert heatmap["options"]["calculate"] is False  # the current heatmap, series as rows


def test_month_to_date_panels_override_the_time_range(dashboards):
    month = [p["title"] for p in dashboards["lockstep-power.json"]["panels"] if p.get("timeFrom") == "now/M"]
    assert month == ["GPU-hours allocated (month to date)", "GPU-hours productive (month to date)",
                     "GPU-hours lost (month to date)", "Lost GPU-hours by cause (month to date)"]


def test_provisioning_files(dashboards):
    ds = yaml.safe_load((DEPLOY / "provisioning" / "datasources" / "lockstep.yaml").read_text())
    [source] = ds["datasources"]
    assert (source["type"], source["uid"], source["isDefault"]) == ("prometheus", "lockstep-prometheus", True)
    providers = yaml.safe_load((DEPLOY / "provisioning" / "dashboards" / "lockstep.yaml").read_text())
    [provider] = providers["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].endswith("/lockstep")


def test_every_stall_cause_has_its_colour_on_the_job_dashboard(dashboards):
    assert set(job.CAUSE_COLOURS) == set(enums.STALL_CAUSES)
    stalls = next(p for p in dashboards["lockstep-job.json"]["panels"] if p["title"] == "Stalls by cause")
    assert {o["matcher"]["options"] for o in stalls["fieldConfig"]["overrides"]} == set(enums.STALL_CAUSES)
