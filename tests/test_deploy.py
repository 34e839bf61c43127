"""deploy/: generated Kubernetes manifests match the code, objects fit together (kinds, selectors,
ports, least privilege), compose and Prometheus configs are valid, systemd units verify and harden."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lockstep import deploy_gen
from lockstep.stack import require_binary

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "deploy" / "kubernetes"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def k8s_objects() -> list[dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [d for name in kustomization["resources"] for d in docs(K8S / name)]


def of_kind(kind: str) -> list[dict]:
    return [o for o in k8s_objects() if o["kind"] == kind]


def test_generated_manifests_are_committed_and_current():
    for name, text in deploy_gen.outputs().items():
        assert (K8S / "generated" / name).read_text() == text, f"run python -m lockstep.deploy_gen ({name})"
    assert deploy_gen.main(["--check"]) == 0


def test_prometheusrule_holds_exactly_the_alerts_package_rules(tmp_path):
    from alerts.build import RULES_FILE, outputs
    from alerts.config import load
    rule = docs(K8S / "generated" / "prometheusrule.yaml")[0]
    expected = yaml.safe_load(outputs(load(REPO / "deploy/prometheus/alerts.yaml"))[RULES_FILE])
    assert rule["spec"]["groups"] == expected["groups"]
    # the same rules the compose/systemd deployments load from deploy/prometheus/
    assert rule["spec"]["groups"] == yaml.safe_load((REPO / "deploy/prometheus" / RULES_FILE).read_text())["groups"]
    assert {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r} >= {
        "PFCPauseStorm", "TrainingJobStraggler", "RackPowerNearBudget"}
    # and Prometheus itself accepts them
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run([require_binary("promtool"), "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_dashboard_configmaps_carry_the_sidecar_label_and_every_dashboard():
    from dashboards.build import build_all
    maps = of_kind("ConfigMap")
    dashboards = {k: json.loads(v) for m in maps if m["metadata"]["labels"].get("grafana_dashboard") == "1"
                  for k, v in m["data"].items()}
    assert dashboards == build_all()
    assert all(d["uid"] for d in dashboards.values())


def test_every_selector_matches_labels():
    workloads = of_kind("DaemonSet") + of_kind("Deployment")
    services = of_kind("Service")
    for w in workloads:
        template = w["spec"]["template"]["metadata"]["labels"]
        assert w["spec"]["selector"]["matchLabels"].items() <= template.items(), w["metadata"]["name"]
    for svc in services:
        pods = [w for w in workloads if svc["spec"]["selector"].items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(pods) == 1, f"service {svc['metadata']['name']} selects {len(pods)} workloads"
        ports = {p["name"] for c in pods[0]["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports
    for sm in of_kind("ServiceMonitor"):
        matched = [s for s in services if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, sm["metadata"]["name"]
        assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in matched[0]["spec"]["ports"]}
        # the operator names the job after the Service; the generated rules select these job names
        assert matched[0]["metadata"]["name"] in ("lockstep-node", "lockstep-power", "lockstep-analytics")
        assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_node_agent_gets_node_label_and_least_privilege():
    (ds,) = of_kind("DaemonSet")
    (sm,) = [s for s in of_kind("ServiceMonitor") if s["metadata"]["name"] == "lockstep-node"]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in sm["spec"]["endpoints"][0]["relabelings"]
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True and not pod.get("hostPID")
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert host_paths["sys"] == "/sys" and host_paths["proc"] == "/proc" and host_paths["root"] == "/"
    assert all(m["readOnly"] for m in mounts.values())
    args = container["args"]
    assert f"--path.sysfs={mounts['sys']['mountPath']}" in args and f"--path.procfs={mounts['proc']['mountPath']}" in args
    assert f"--path.rootfs={mounts['root']['mountPath']}" in args


def test_node_agent_sees_the_host_mounts_made_after_it_started():
    """/host/proc/self/mountstats lists the agent container's own mount namespace: the host's NFS and
    Lustre mounts are there only through the host's / mounted with HostToContainer propagation
    (without it, a mount made after the pod started, e.g. an automount, never shows up)."""
    (ds,) = of_kind("DaemonSet")
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    (root,) = [m for m in container["volumeMounts"] if m["name"] == "root"]
    assert root["mountPropagation"] == "HostToContainer"


def test_kustomize_builds_offline():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: kustomize build not checked")
    out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, check=True).stdout
    built = [d for d in yaml.safe_load_all(out) if d]
    assert len(built) == len(k8s_objects())
    assert all(d["metadata"].get("namespace") == "lockstep" for d in built if d["kind"] != "Namespace")


def test_compose_services_mounts_and_prometheus_config():
    compose_dir = REPO / "deploy" / "compose"
    compose = yaml.safe_load((compose_dir / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"prometheus", "alertmanager", "grafana", "analytics", "power-exporter"}
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes", []):
            src = volume.split(":")[0]
            if src.startswith("."):
                assert (compose_dir / src).exists(), f"{name}: {src} missing"
    prom = yaml.safe_load((compose_dir / "prometheus.yml").read_text())
    jobs = {j["job_name"] for j in prom["scrape_configs"]}
    assert {"lockstep-node", "lockstep-power", "lockstep-analytics"} <= jobs
    assert "cluster" in prom["global"]["external_labels"]
    targets = yaml.safe_load((compose_dir / "targets" / "nodes.yml").read_text())
    assert all("node" in t["labels"] for t in targets)
    for config in ("prometheus.yml",):
        check = subprocess.run([require_binary("promtool"), "check", "config", "--syntax-only",
                                str(compose_dir / config)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    amtool = subprocess.run([require_binary("amtool"), "check-config", str(REPO / "deploy/prometheus/alertmanager.yml")],
                            capture_output=True, text=True)
    assert amtool.returncode == 0, amtool.stdout + amtool.stderr


HARDENING = ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
             "CapabilityBoundingSet=", "DynamicUser=yes", "RestrictAddressFamilies=", "SystemCallFilter=@system-service")


@pytest.mark.parametrize("unit", ["lockstep-exporter.service", "lockstep-power-exporter.service",
                                  "lockstep-analytics.service"])
def test_systemd_units_verify_and_are_hardened(unit, tmp_path):
    text = (REPO / "deploy" / "systemd" / unit).read_text()
    lines = set(text.splitlines())
    assert all(any(line.startswith(h) for line in lines) for h in HARDENING), unit
    if unit == "lockstep-exporter.service":
        assert "ReadOnlyPaths=/sys /proc /run/lockstep" in lines and "DevicePolicy=closed" in lines
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed: unit syntax not verified")
    # verify needs ExecStart binaries that exist here; the unit is otherwise checked as written.
    copy = tmp_path / unit
    copy.write_text(text.replace("/opt/lockstep/venv/bin/lockstep", "/bin/true"))
    out = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                         env={"SYSTEMD_LOG_LEVEL": "notice", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr


def test_compose_prometheus_exposes_no_unauthenticated_admin_endpoints():
    """Port 9090 is published on every interface without auth: with --web.enable-lifecycle anyone who
    reaches it can POST /-/quit; the admin API deletes series. file_sd targets reload by themselves and
    rules reload with `docker compose kill -s HUP prometheus`."""
    compose = yaml.safe_load((REPO / "deploy" / "compose" / "docker-compose.yml").read_text())
    command = compose["services"]["prometheus"]["command"]
    assert not {"--web.enable-lifecycle", "--web.enable-admin-api"} & set(command), command


def test_exporter_unit_starts_on_a_node_where_no_job_has_run_since_boot():
    """/run is a tmpfs: after a reboot /run/lockstep exists only once a Slurm prolog ran. systemd refuses
    to set up the namespace (status 226/NAMESPACE) for a ReadOnlyPaths= entry that does not exist unless
    it is '-'-prefixed or created before, so the agent must not depend on a job having run."""
    lines = (REPO / "deploy" / "systemd" / "lockstep-exporter.service").read_text().splitlines()
    ro = [p for line in lines if line.startswith("ReadOnlyPaths=") for p in line.split("=", 1)[1].split()]
    created = {w for line in lines if line.startswith("ExecStartPre=+") and "mkdir" in line
               for w in line.split() if w.startswith("/run/")}
    for path in (p for p in ro if p.startswith("/run/")):
        assert path in created, f"{path} may not exist at boot: create it in ExecStartPre=+ (mode 0755)"
    assert all("-m 0755" in line for line in lines if line.startswith("ExecStartPre=+") and "mkdir" in line)
