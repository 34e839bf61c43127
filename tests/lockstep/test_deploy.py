"""deploy/: the generated Kubernetes files match the code and the chart (the chart itself: test_deploy_helm*.py;
schemas: test_deploy_schemas.py, beside this file), compose and Prometheus configs are valid, systemd units verify and harden."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from lockstep import deploy_gen
from lockstep.exporters.catalog.selectors import QUARANTINE_JOB
from lockstep.stack import require_binary
from tests.helpers.paths import REPO

K8S = REPO / "deploy" / "kubernetes"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def k8s_objects() -> list[dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [d for name in kustomization["resources"] for d in docs(K8S / name)]


def of_kind(kind: str) -> list[dict]:
    return [o for o in k8s_objects() if o["kind"] == kind]


def test_generated_files_are_committed_and_current():
    """The chart's files/ and deploy/kubernetes/generated/ are what `python -m lockstep.deploy_gen` writes."""
    for path, text in deploy_gen.outputs().items():
        assert path.read_text() == text, f"run python -m lockstep.deploy_gen ({path.relative_to(REPO)})"
    assert deploy_gen.main(["--check"]) == 0


def test_kustomization_applies_every_generated_file():
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    generated = {f"generated/{p.name}" for p in (K8S / "generated").iterdir()}
    assert generated <= listed and all((K8S / name).exists() for name in listed)
    # the rendered objects are the chart's, for the values it is rendered with (chart-values.yaml)
    rendered = deploy_gen.manifests(deploy_gen.render_chart(yaml.safe_load(deploy_gen.CHART_VALUES.read_text())))
    applied = k8s_objects()
    assert all(o in applied for o in rendered) and len(rendered) >= 15


@pytest.mark.integration
def test_kustomize_builds_offline():
    out = subprocess.run([require_binary("kubectl"), "kustomize", str(K8S)], capture_output=True, text=True, check=True).stdout
    built = [d for d in yaml.safe_load_all(out) if d]
    assert len(built) == len(k8s_objects())
    cluster_scoped = ("Namespace", "ClusterRole", "ClusterRoleBinding")
    assert all(d["metadata"].get("namespace") == "lockstep" for d in built if d["kind"] not in cluster_scoped)


@pytest.mark.integration
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
    assert {"lockstep-node", "lockstep-power", "lockstep-analytics", "lockstep-fabric", "lockstep-switch",
            "lockstep-storage", QUARANTINE_JOB} <= jobs
    for job in prom["scrape_configs"]:   # every file a job reads is here, a list (empty until a site adds one)
        for sd in job.get("file_sd_configs", []):
            for path in sd["files"]:
                listed = compose_dir / "targets" / path.removeprefix("/etc/prometheus/targets/")
                assert isinstance(yaml.safe_load(listed.read_text()), list), path
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


@pytest.mark.integration
@pytest.mark.parametrize("unit", ["lockstep-exporter.service", "lockstep-power-exporter.service",
                                  "lockstep-analytics.service", "lockstep-fabric-exporter.service",
                                  "lockstep-switch-exporter.service", "lockstep-storage-exporter.service"])
def test_systemd_units_verify_and_are_hardened(unit, tmp_path):
    text = (REPO / "deploy" / "systemd" / unit).read_text()
    lines = set(text.splitlines())
    assert all(any(line.startswith(h) for line in lines) for h in HARDENING), unit
    if unit == "lockstep-exporter.service":
        assert "ReadOnlyPaths=/sys /proc /run/lockstep" in lines and "DevicePolicy=closed" in lines
    if unit == "lockstep-fabric-exporter.service":   # the umad devices alone, for ibnetdiscover and perfquery
        assert {"DevicePolicy=closed", "DeviceAllow=char-infiniband_mad rw"} <= lines
    else:
        assert "DeviceAllow=char-infiniband_mad rw" not in lines
    analyze = require_binary("systemd-analyze")
    # verify needs ExecStart binaries that exist here; the unit is otherwise checked as written.
    copy = tmp_path / unit
    copy.write_text(text.replace("/opt/lockstep/venv/bin/lockstep", "/bin/true"))
    out = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                         env={"SYSTEMD_LOG_LEVEL": "notice", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr


def test_every_exporter_command_has_a_unit_listening_on_its_port():
    """Each long-running command has a unit in deploy/systemd/ serving on the port docs/architecture.md gives it."""
    ports = {"exporter": 9840, "power-exporter": 9841, "analytics serve": 9842, "fabric-exporter": 9843,
             "switch-exporter": 9846, "storage-exporter": 9847}
    units = {p.name: p.read_text() for p in (REPO / "deploy" / "systemd").glob("*.service")}
    for command, port in ports.items():
        serving = [name for name, text in units.items()
                   if any(line.startswith("ExecStart=") and f"bin/lockstep {command} " in line
                          and f":{port}" in line for line in text.splitlines())]
        assert len(serving) == 1, (command, port, serving)


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


def test_node_agent_reads_the_validation_results_the_gate_writes():
    """The gate Job writes the host's /var/lib/lockstep/validation; the rendered agent mounts it read-only."""
    (ds,) = of_kind("DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--validation.results-dir=/host/validation" in container["args"]
    assert {"name": "validation", "mountPath": "/host/validation", "readOnly": True} in container["volumeMounts"]
    assert {v["name"]: v for v in pod["volumes"]}["validation"]["hostPath"]["path"] == "/var/lib/lockstep/validation"
    job = docs(K8S / "validation-gate-job.yaml")[0]
    gate_pod = job["spec"]["template"]["spec"]
    (gate,) = gate_pod["containers"]
    assert {v["name"]: v for v in gate_pod["volumes"]}["results"]["hostPath"]["path"] == "/var/lib/lockstep/validation"
    assert {"name": "LOCKSTEP_RESULTS_DIR", "value": "/var/lib/lockstep/validation"} in gate["env"]
    assert {"name": "LOCKSTEP_GATE_DRAIN", "value": "kubernetes"} in gate["env"]
    # the script the Job runs is the one Slurm runs (a ConfigMap made from it), and it may cordon, nothing more
    assert "--from-file=deploy/gate/lockstep-gate.sh" in (K8S / "validation-gate-job.yaml").read_text()
    assert {v["name"]: v for v in gate_pod["volumes"]}["gate"]["configMap"]["name"] == "lockstep-gate"
    assert gate_pod["serviceAccountName"] == "lockstep-gate" and job["spec"]["backoffLimit"] == 0
    (role,) = [d for d in docs(K8S / "validation-gate-rbac.yaml") if d["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert gate["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
