"""deploy/helm/lockstep: Helm's own engine (helm-python-sdk) lints and renders the chart for its default
values and every values file under ci/ (and deploy/kubernetes/chart-values.yaml); its values schema
refuses bad values; the objects fit together (selectors, ports, the scrape jobs the rules select on);
the PrometheusRule and the dashboards are exactly what the alerts and dashboards packages build."""
from __future__ import annotations

import json
import subprocess

import helm_python
import pytest
import yaml

from lockstep import deploy_gen
from lockstep.exporters.catalog.selectors import ANALYTICS_JOB, FABRIC_JOB, NODE_JOB, POWER_JOB, STORAGE_JOB, SWITCH_JOB
from lockstep.stack import require_binary
from tests.helpers.deploy_manifests import CASES, CHART, named, objects, of_kind, pod_spec, rendered, values
from tests.helpers.paths import REPO

KUBE_VERSIONS = ("v1.35.0", "v1.36.0", "v1.37.0")   # as tests/lockstep/test_deploy_schemas.py validates
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")


@pytest.mark.parametrize("case, kube", [(case, KUBE_VERSIONS[-1]) for case in CASES] +
                         [("default", kube) for kube in KUBE_VERSIONS[:-1]])
def test_chart_lints_clean(case, kube):
    """helm lint --strict: templates, YAML, the values schema, and APIs deprecated in that version."""
    report = helm_python.lint(CHART, values(case), strict=True, kube_version=kube)
    problems = [m for m in report["messages"] if m["severity"] >= 2]   # 2 warning, 3 error (1: info)
    assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize("bad, where", [
    ({"nodeAgent": {"jobs": {"source": "k8s"}}}, "source"),
    ({"nodeAgent": {"jobs": {"sorce": "kubernetes"}}}, "sorce"),
    ({"analytics": {"shards": 0}}, "shards"),
    ({"analytics": {"extraArgs": ["shard=1/2"]}}, "extraArgs"),
    ({"powerExporter": {"enabled": True}}, "targets"),
    ({"nodeAgent": {"serviceMonitor": {"interval": "15 seconds", "scrapeTimeout": "10s"}}}, "interval"),
])
def test_values_schema_refuses_bad_values(bad, where):
    with helm_python.Chart.load(CHART) as chart:
        chart.validate_schema(chart.merge_values({}))
        with pytest.raises(helm_python.HelmValuesError, match=where):
            chart.validate_schema(chart.merge_values(bad))


def test_every_values_file_is_valid_and_renders_every_component():
    with helm_python.Chart.load(CHART) as chart:
        for case in CASES:
            chart.validate_schema(chart.merge_values(values(case)))
    assert set(CASES) >= {"default", "kubernetes-jobs", "dcgm", "sharded-analytics", "slurm", "fabric", "kustomize"}
    kinds = {o["kind"] for case in CASES for o in objects(case)}
    assert kinds == {"DaemonSet", "Deployment", "StatefulSet", "Service", "ServiceAccount", "ClusterRole",
                     "ClusterRoleBinding", "ConfigMap", "ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize("case", CASES)
def test_services_select_one_workload_and_its_ports(case):
    objs = objects(case)
    workloads = [o for o in objs if o["kind"] in WORKLOADS]
    for w in workloads:
        assert w["spec"]["selector"]["matchLabels"].items() <= pod_labels(w).items(), w["metadata"]["name"]
    for svc in of_kind(objs, "Service"):
        (pod,) = [w for w in workloads if svc["spec"]["selector"].items() <= pod_labels(w).items()]
        ports = {p["name"] for c in pod_spec(pod)["containers"] for p in c["ports"]}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports


def pod_labels(workload: dict) -> dict:
    return workload["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("case", CASES)
def test_scrape_jobs_are_the_names_the_rules_select(case):
    """The operator names the job after the Service's jobLabel label: the catalog's job names."""
    objs = objects(case)
    jobs = set()
    for sm in of_kind(objs, "ServiceMonitor"):
        (svc,) = [s for s in of_kind(objs, "Service")
                  if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        jobs.add(svc["metadata"]["labels"][sm["spec"]["jobLabel"]])
        assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}
        assert sm["metadata"]["labels"].items() >= values_of(case, "prometheusSelectorLabels").items()
    optional = {POWER_JOB: "powerExporter", FABRIC_JOB: "fabricExporter", SWITCH_JOB: "switchExporter",
                STORAGE_JOB: "storageExporter"}
    expected = {NODE_JOB, ANALYTICS_JOB} | {job for job, key in optional.items() if values_of(case, key).get("enabled")}
    assert jobs == expected


def values_of(case: str, key: str) -> dict:
    with helm_python.Chart.load(CHART) as chart:
        return chart.merge_values(values(case))[key]


def test_job_names_do_not_depend_on_the_release_name():
    objs = deploy_gen.manifests(deploy_gen.render_chart({}, release="gpu-telemetry", namespace="obs"))
    svc = named(objs, "Service", "gpu-telemetry-lockstep-node")
    assert svc["metadata"]["labels"]["app.kubernetes.io/name"] == NODE_JOB
    namespaced = [o for o in objs if o["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    assert {o["metadata"].get("namespace") for o in namespaced} == {"obs"}


def test_node_series_get_the_node_label_from_the_pod():
    sm = named(objects("default"), "ServiceMonitor", "lockstep-node")
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in \
        sm["spec"]["endpoints"][0]["relabelings"]


@pytest.mark.integration
def test_prometheusrule_holds_the_alerts_package_rules(tmp_path):
    from lockstep.alerts.build import RULES_FILE, outputs
    from lockstep.alerts.config import load
    expected = yaml.safe_load(outputs(load(deploy_gen.ALERTS_SITE_CONFIG))[RULES_FILE])["groups"]
    rule = named(objects("default"), "PrometheusRule", "lockstep")
    assert rule["spec"]["groups"] == expected
    # the same rules the compose/systemd deployments load from deploy/prometheus/
    assert expected == yaml.safe_load((REPO / "deploy/prometheus" / RULES_FILE).read_text())["groups"]
    assert {r["alert"] for g in expected for r in g["rules"] if "alert" in r} >= {
        "PFCPauseStorm", "TrainingJobStraggler", "RackPowerNearBudget"}
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # and Prometheus itself accepts them as rendered
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run([require_binary("promtool"), "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_site_rule_file_replaces_the_generated_one():
    site = "groups:\n  - name: site\n    rules:\n      - {alert: SiteAlert, expr: up == 0, for: 5m}\n"
    rule = named(deploy_gen.manifests(deploy_gen.render_chart({"prometheusRule": {"rulesFile": site}})),
                 "PrometheusRule", "lockstep")
    assert rule["spec"]["groups"] == yaml.safe_load(site)["groups"]
    with pytest.raises(helm_python.HelmRenderError, match="no rule groups"):
        deploy_gen.render_chart({"prometheusRule": {"rulesFile": "alerts: []\n"}})


@pytest.mark.parametrize("case", ["default", "kubernetes-jobs"])
def test_dashboard_configmaps_for_the_grafana_sidecar(case):
    from lockstep.dashboards.build import build_all
    maps = [m for m in of_kind(objects(case), "ConfigMap") if "grafana_dashboard" in m["metadata"]["labels"]]
    assert {k: json.loads(v) for m in maps for k, v in m["data"].items()} == build_all()
    namespace = values_of(case, "dashboards")["namespace"] or "lockstep"
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1" and m["metadata"]["namespace"] == namespace
        assert m["metadata"]["annotations"] == {"grafana_folder": "lockstep"}
        assert all(json.loads(text)["uid"] for text in m["data"].values())
        assert len(m["metadata"]["name"]) <= 63


def test_notes_tell_how_to_check_the_install():
    notes = rendered("kubernetes-jobs")["lockstep/templates/NOTES.txt"]
    assert "rollout status daemonset/lockstep-node" in notes and "from: kubernetes" in notes
    assert "release=<its release name>" in notes and "namespace monitoring" in notes
    assert "power exporter is off" in notes
    assert "power exporter is off" not in rendered("kustomize")["lockstep/templates/NOTES.txt"]


def test_every_component_can_be_turned_off():
    off = {"nodeAgent": {"enabled": False}, "analytics": {"enabled": False}, "serviceMonitors": {"enabled": False},
           "prometheusRule": {"enabled": False}, "dashboards": {"enabled": False}}
    assert deploy_gen.manifests(deploy_gen.render_chart(off)) == []
