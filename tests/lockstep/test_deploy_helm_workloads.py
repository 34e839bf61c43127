"""The chart's workloads as rendered by Helm's engine: the node agent's host access and privileges per
job source (docs/deploy.md, "Node agent privileges"), the analytics shards, the power exporter, and
every flag the chart passes is one the lockstep command accepts."""
from __future__ import annotations

import re

import pytest

from lockstep import deploy_gen
from lockstep.analytics.service.config import Shard, parse_shard
from lockstep.cli import build_parser
from tests.helpers.deploy_manifests import CASES, container, named, objects, of_kind, pod_spec, values

WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")
ENV_REF = re.compile(r"\$\((\w+)\)")
FIELD_VALUES = {"spec.nodeName": "gpu-node-07", "metadata.labels['apps.kubernetes.io/pod-index']": "3"}


def agent(case: str) -> dict:
    return named(objects(case), "DaemonSet", "lockstep-node")


def expanded_args(c: dict) -> list[str]:
    """The args as the kubelet runs them: $(VAR) replaced by the env var's value (a downward-API field
    gets an example value)."""
    env = {e["name"]: e.get("value") or FIELD_VALUES[e["valueFrom"]["fieldRef"]["fieldPath"]] for e in c.get("env", [])}
    return [ENV_REF.sub(lambda m: env[m.group(1)], arg) for arg in c["args"]]


@pytest.mark.parametrize("case", CASES)
def test_every_flag_the_chart_passes_is_one_lockstep_accepts(case, capsys):
    for workload in (o for o in objects(case) if o["kind"] in WORKLOADS):
        error = parse_error(expanded_args(container(workload)), capsys)
        assert error is None, f"{workload['metadata']['name']}: {error}"


def parse_error(argv: list[str], capsys) -> str | None:
    try:
        build_parser(argv).parse_args(argv)
    except SystemExit:
        return capsys.readouterr().err
    return None


@pytest.mark.parametrize("case", CASES)
def test_node_agent_reads_the_host_read_only_without_capabilities(case):
    pod = pod_spec(agent(case))
    c = container(agent(case))
    assert c["securityContext"] == {"privileged": False, "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"} and not pod.get("hostPID")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert all(m["readOnly"] for m in mounts.values())
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert (host["sys"], host["proc"], host["root"]) == ("/sys", "/proc", "/")
    for flag, volume in (("sysfs", "sys"), ("procfs", "proc"), ("rootfs", "root")):
        assert f"--path.{flag}={mounts[volume]['mountPath']}" in c["args"]
    # /host/proc/self/mountstats lists the agent's own mount namespace: the host's NFS and Lustre
    # mounts, even those made after the pod started, are there only through this propagation
    assert mounts["root"]["mountPropagation"] == "HostToContainer"
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"   # PFC counters
    assert "--node.name=$(NODE_NAME)" in c["args"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]


@pytest.mark.parametrize("case", ["default", "kubernetes-jobs"])
def test_node_agent_maps_gpus_to_pods_with_read_only_pod_access(case):
    objs, pod, c = objects(case), pod_spec(agent(case)), container(agent(case))
    source = values(case).get("nodeAgent", {}).get("jobs", {}).get("source", "auto")
    assert f"--jobs.source={source}" in c["args"]
    # the kubelet's socket directory at the same path, where the agent looks by default
    (resources,) = [v for v in pod["volumes"] if v["name"] == "pod-resources"]
    assert resources["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    mount = {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}
    assert mount in c["volumeMounts"]
    # root for connect(2) on the kubelet's root-owned socket, and nothing more
    assert pod["securityContext"]["runAsUser"] == 0 and pod["automountServiceAccountToken"] is True
    (role,) = of_kind(objs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    (binding,) = of_kind(objs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "lockstep"}
    assert binding["subjects"] == [account]
    slurm_dir = any(v["name"] == "gpu-jobs" for v in pod["volumes"])
    assert slurm_dir == (source == "auto") == any(a.startswith("--jobs.mapping-dir=") for a in c["args"])


def test_a_moved_kubelet_directory_is_mounted_where_the_agent_looks():
    moved = {"nodeAgent": {"jobs": {"source": "kubernetes", "podResourcesDir": "/var/lib/k0s/kubelet/pod-resources"}}}
    ds = named(deploy_gen.manifests(deploy_gen.render_chart(moved)), "DaemonSet", "lockstep-node")
    (volume,) = [v for v in pod_spec(ds)["volumes"] if v["name"] == "pod-resources"]
    assert volume["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"
    (mount,) = [m for m in container(ds)["volumeMounts"] if m["name"] == "pod-resources"]
    assert mount["mountPath"] == "/var/lib/kubelet/pod-resources"   # the agent's default socket directory


def test_slurm_only_agent_runs_as_nobody_without_api_access():
    objs, pod, c = objects("slurm"), pod_spec(agent("slurm")), container(agent("slurm"))
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65534
    assert pod["automountServiceAccountToken"] is False
    assert not of_kind(objs, "ClusterRole") and not of_kind(objs, "ClusterRoleBinding")
    assert not any(v["name"] == "pod-resources" for v in pod["volumes"])
    host = {v["name"]: v["hostPath"] for v in pod["volumes"]}
    assert host["gpu-jobs"] == {"path": "/run/lockstep/gpu-jobs", "type": "DirectoryOrCreate"}
    assert "--jobs.mapping-dir=/host/run/lockstep/gpu-jobs" in c["args"]
    assert "--infiniband.expected-rate=mlx5_*=400" in c["args"]


def test_dcgm_case_reads_the_host_engine_and_keeps_the_gpu_operator_runtime():
    pod, c = pod_spec(agent("dcgm")), container(agent("dcgm"))
    assert {"--gpu.backend=dcgm", "--gpu.metric-names=dcgm"} <= set(c["args"])
    assert "runtimeClassName" not in pod and pod["hostNetwork"] is True   # nv-hostengine on the node's localhost
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in c["env"]
    assert {"key": "node-role.kubernetes.io/gpu", "operator": "Exists"} in pod["tolerations"]
    default = pod_spec(agent("default"))
    assert default["runtimeClassName"] == "nvidia" and default["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in default["tolerations"]


def test_sharded_analytics_pod_i_scores_shard_i_of_n():
    (sts,) = of_kind(objects("sharded-analytics"), "StatefulSet")
    assert sts["spec"]["replicas"] == 4 and sts["spec"]["serviceName"] == "lockstep-analytics"
    assert not of_kind([o for o in objects("sharded-analytics") if "analytics" in o["metadata"]["name"]], "Deployment")
    c = container(sts)
    (shard_arg,) = [a for a in c["args"] if a.startswith("--shard=")]
    for index in range(4):
        FIELD_VALUES["metadata.labels['apps.kubernetes.io/pod-index']"] = str(index)
        (arg,) = [a for a in expanded_args(c) if a.startswith("--shard=")]
        assert parse_shard(arg.split("=", 1)[1]) == Shard(index, 4), shard_arg
    assert "--prometheus-url=http://thanos-query.monitoring.svc:9090" in c["args"]
    single = container(named(objects("default"), "Deployment", "lockstep-analytics"))
    assert not any(a.startswith("--shard") for a in single["args"])   # 0/1: every job


def power_objects(case: str) -> list[dict]:
    return [o for o in objects(case) if o["metadata"]["labels"].get("app.kubernetes.io/component") == "power"]


def test_power_exporter_config_and_credentials():
    assert power_objects("default") == []   # off until it has targets
    deploy = named(objects("kustomize"), "Deployment", "lockstep-power")
    volumes = {v["name"]: v for v in pod_spec(deploy)["volumes"]}
    config = named(objects("kustomize"), "ConfigMap", volumes["config"]["configMap"]["name"])
    assert "r1-pdu" in config["data"]["power-exporter.yaml"]
    assert volumes["credentials"]["secret"] == {"secretName": "lockstep-bmc", "optional": True}
    own_config = named(objects("sharded-analytics"), "Deployment", "lockstep-power")
    own = {v["name"]: v for v in pod_spec(own_config)["volumes"]}
    assert own["config"] == {"name": "config", "secret": {"secretName": "lockstep-power-config"}}
    assert not of_kind(power_objects("sharded-analytics"), "ConfigMap")


@pytest.mark.parametrize("case", CASES)
def test_only_the_node_agent_may_run_as_root(case):
    for workload in (o for o in objects(case) if o["kind"] in WORKLOADS and o["metadata"]["name"] != "lockstep-node"):
        pod = pod_spec(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
        assert container(workload)["securityContext"]["readOnlyRootFilesystem"] is True
