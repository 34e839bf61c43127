"""The ``nccl-inspector`` collector on a node directory of NCCL Inspector files (tests/fixtures/nccl-inspector): both
layouts served in base units and joined to the GPU's job (Slurm mapping files, or a Kubernetes pod through the
simulated kubelet and API server), NCCL's own names for its Grafana template, a file cut or being rewritten never
served in part, stale files, the caps reported; and the real node agent serving it over HTTP."""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from lockstep import stack as stack_mod
from lockstep.exporters import registry
from lockstep.exporters.catalog import nccl_inspector as m
from lockstep.exporters.collectors.nccl_inspector import NcclInspectorOptions, served
from lockstep.exporters.jobs.placement import Placement
from lockstep.exporters.nccl import inspector as fmt
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.simulator.kubeapi import PodStore, create_app
from lockstep.simulator.kubelet import Kubelet
from lockstep.simulator.kubepods import SimContainer, SimPod
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES

INSPECTOR = FIXTURES / "nccl-inspector"
GPUS_JSON = FIXTURES / "gpu" / "node00" / "gpus.json"
UUID = [f"2f6c1c1e-0b3a-4c55-9d7e-00000000000{g}" for g in range(3)]      # the GPUs of gpus.json
STRANGER = "0badc0de-0000-4000-8000-000000000009"                         # a GPU the node does not list
NOW = 1_767_225_600.0


def name(uuid: str) -> str:
    return f"nccl_inspector_metrics_{uuid}.prom"


def put(directory: Path, uuid: str, data: bytes, age: float = 5.0) -> Path:
    path = directory / name(uuid)
    path.write_bytes(data)
    os.utime(path, (NOW - age, NOW - age))
    return path


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """node00: three GPUs, Slurm job 4242 on GPUs 0 and 1, an Inspector directory with a 2.30 file (NCCL's README
    example) on GPU 0, a 2.29 file on GPU 1, and a 2.30 file of a GPU the node does not list."""
    root = tmp_path / "node00"
    root.mkdir()
    shutil.copy(GPUS_JSON, root / "gpus.json")
    (root / "gpu-jobs").mkdir()
    for gpu in (0, 1):
        (root / "gpu-jobs" / str(gpu)).write_text("4242\n")
    inspector = root / "nccl-inspector"
    inspector.mkdir()
    put(inspector, UUID[0], (INSPECTOR / "readme-v2.30.7-example.prom").read_bytes())
    put(inspector, UUID[1], (INSPECTOR / "v2.29-constructed.prom").read_bytes())
    put(inspector, STRANGER, (INSPECTOR / "readme-v2.30.7-example.prom").read_bytes().replace(
        b'slurm_job_id="unknown"', b'slurm_job_id="777"'))
    (inspector / "notes.txt").write_text("not NCCL's\n")
    return root


@pytest.fixture
def collectors():
    made = []

    def start(root: Path, *flags: str):
        config = exporter_config("--collector.disable-defaults", "--collector.nccl-inspector", "--jobs.source=slurm",
                                 f"--sim.node-root={root}", *flags)
        collector = registry.load()["nccl-inspector"].factory(config)
        collector.clock = lambda: NOW
        made.append(collector)
        return collector

    yield start
    for collector in made:
        collector.close()


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def series(text: str, metric: str) -> list[dict]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]), value=float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines() if line.startswith(metric + "{")]


def value(text: str, metric: str, **labels: str) -> float | None:
    for s in series(text, metric):
        if all(s.get(k) == v for k, v in labels.items()):
            return s["value"]
    return None


def test_golden_exposition_of_a_node_with_both_layouts(node, collectors, golden):
    golden("nccl-inspector/node00.prom", render(collectors(node)))


def test_both_layouts_in_base_units_joined_to_the_slurm_job(node, collectors):
    text = render(collectors(node))
    assert value(text, m.BUS_BANDWIDTH.name, job_id="4242", gpu="0", uuid=f"GPU-{UUID[0]}", comm_name="DP Group 0",
                 collective="AllReduce", message_size="4-5GB", algo_proto="Ring_ll", nranks="4") == 678.263e9
    assert value(text, m.EXEC_TIME.name, gpu="0", collective="AllReduce") == pytest.approx(9498.47e-6, rel=1e-12)
    assert value(text, m.P2P_BUS_BANDWIDTH.name, gpu="0", p2p_operation="Send", message_size="512-513MB") == 464.9e9
    assert value(text, m.ALGORITHM_BANDWIDTH.name, job_id="4242", gpu="1", comm_id="0xd152c00f111816", rank="4",
                 message_size="2.00GB") == 238.609e9
    # a GPU the node does not list keeps its UUID from the file name; its job from NCCL's own label
    assert value(text, m.BUS_BANDWIDTH.name, job_id="777", gpu="", uuid=f"GPU-{STRANGER}") == 678.263e9
    assert value(text, m.FILES.name, state="served") == 3
    assert not any("coll_sn" in line or "timestamp" in line or "hostname" in line for line in text.splitlines())


def test_nccls_own_names_carry_its_labels_for_its_grafana_template(node, collectors):
    text = render(collectors(node, "--nccl-inspector.metric-names=nccl"))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (readme_line,) = [s for s in families["nccl_bus_bandwidth_gbs"].samples if s.labels["uuid"] == f"GPU-{UUID[0]}"]
    labels = {k: v for k, v in readme_line.labels.items() if v}     # Prometheus drops empty labels
    assert labels == {"job_id": "4242", "uuid": f"GPU-{UUID[0]}", "version": "v5.1", "slurm_job_id": "unknown",
                      "node": "nvl72004-T01", "gpu": "GPU0", "comm_name": "DP Group 0", "n_nodes": "1",
                      "nranks": "4", "collective": "AllReduce", "message_size": "4-5GB", "algo_proto": "Ring_ll"}
    assert readme_line.value == 678.263
    assert {"nccl_algorithm_bandwidth_gbs", "nccl_collective_exec_time_microseconds", "nccl_p2p_bus_bandwidth_gbs",
            "nccl_p2p_exec_time_microseconds"} <= set(families)
    assert m.BUS_BANDWIDTH.name in families     # lockstep's names stay


def test_a_truncated_file_is_skipped_whole_and_counted_then_read_when_complete(node, collectors):
    collector = collectors(node)
    whole = (INSPECTOR / "v2.29-constructed.prom").read_bytes()
    cut = whole[:whole.index(b"\n", len(whole) // 2) - 7]          # mid-line, as NCCL might leave it
    path = put(node / "nccl-inspector", UUID[1], cut)
    text = render(collector)
    assert value(text, m.READS_SKIPPED.name, reason="truncated") == 1
    assert value(text, m.FILES.name, state="skipped") == 1 and value(text, m.FILES.name, state="served") == 2
    assert [s for s in series(text, m.BUS_BANDWIDTH.name) if s["gpu"] == "1"] == []
    assert value(render(collector), m.READS_SKIPPED.name, reason="truncated") == 1   # counted once per version
    path.write_bytes(whole)
    os.utime(path, (NOW - 1, NOW - 1))
    text = render(collector)
    assert len([s for s in series(text, m.BUS_BANDWIDTH.name) if s["gpu"] == "1"]) == 2


def test_a_file_being_rewritten_is_not_read_its_last_complete_read_is_served(node, collectors):
    collector = collectors(node)
    before = render(collector)
    path = put(node / "nccl-inspector", UUID[0], b"", age=0.05)       # NCCL just truncated it
    text = render(collector)
    assert value(text, m.READS_SKIPPED.name, reason="writing") == 1
    assert series(text, m.BUS_BANDWIDTH.name) == series(before, m.BUS_BANDWIDTH.name)
    assert value(text, m.FILES.name, state="served") == 3
    os.utime(path, (NOW - 1, NOW - 1))                                  # settled empty: 2.29's idle interval
    assert [s for s in series(render(collector), m.BUS_BANDWIDTH.name) if s["gpu"] == "0"] == []


def test_a_file_its_process_left_behind_ages_out(node, collectors):
    put(node / "nccl-inspector", UUID[0], (INSPECTOR / "readme-v2.30.7-example.prom").read_bytes(), age=600)
    text = render(collectors(node, "--nccl-inspector.max-age=120"))
    assert value(text, m.FILE_AGE.name, gpu="0", job_id="4242") == 600
    assert value(text, m.FILES.name, state="stale") == 1
    assert [s for s in series(text, m.BUS_BANDWIDTH.name) if s["gpu"] == "0"] == []
    os.unlink(node / "nccl-inspector" / name(UUID[0]))                  # finalize removes it
    assert value(render(collectors(node)), m.FILE_AGE.name, gpu="0") is None


def test_a_file_over_the_size_cap_is_skipped(node, collectors):
    text = render(collectors(node, "--nccl-inspector.max-file-bytes=1000"))     # the 2.29 file has 1667
    assert value(text, m.READS_SKIPPED.name, reason="too_large") == 1
    assert [s for s in series(text, m.BUS_BANDWIDTH.name) if s["gpu"] == "1"] == []
    assert value(text, m.FILES.name, state="served") == 2 and value(text, m.FILES.name, state="skipped") == 1
    assert value(text, m.LIMIT.name, cap="file_bytes") == 1000


def many_buckets(comms: int, sizes: int) -> bytes:
    out = []
    for c in range(comms):
        for s in range(sizes):
            labels = (f'version="v5.1",slurm_job_id="unknown",node="n",gpu="GPU2",comm_name="comm{c:02d}",'
                      f'n_nodes="1",nranks="{c + 2}",collective="AllGather",message_size="{s + 1}-{s + 2}MB",'
                      f'algo_proto="RING_SIMPLE"')
            out += [f"nccl_bus_bandwidth_gbs{{{labels}}} 100\n", f"nccl_collective_exec_time_microseconds{{{labels}}} 9\n"]
    return "".join(out).encode()


def test_the_caps_keep_the_largest_communicators_and_sizes_and_say_what_they_left_out(node, collectors):
    put(node / "nccl-inspector", UUID[2], many_buckets(20, 20))
    text = render(collectors(node, "--nccl-inspector.max-communicators=16", "--nccl-inspector.max-message-sizes=4"))
    kept = [s for s in series(text, m.BUS_BANDWIDTH.name) if s["uuid"] == f"GPU-{UUID[2]}"]   # fell off the bus
    assert len(kept) == 16 * 4
    assert {s["comm_name"] for s in kept} == {f"comm{c:02d}" for c in range(4, 20)}     # the most ranks
    assert {s["message_size"] for s in kept} == {"17-18MB", "18-19MB", "19-20MB", "20-21MB"}
    assert value(text, m.CAPPED.name, cap="communicators") == 4
    assert value(text, m.CAPPED.name, cap="message_sizes") == 16 * 16
    assert value(text, m.LIMIT.name, cap="communicators") == 16 and value(text, m.LIMIT.name, cap="message_sizes") == 4


def test_a_rewrite_serves_its_new_values_and_a_changed_job_its_new_id(node, collectors):
    """NCCL rewrites a file with the same buckets and new values: what is served comes from the new read (the series
    the buckets make, their labels and the caps' choice, are kept from the last read of the same buckets)."""
    flags = ("--nccl-inspector.max-message-sizes=2",)
    collector = collectors(node, *flags)
    inspector = node / "nccl-inspector"
    put(inspector, UUID[2], many_buckets(2, 3))
    before = series(render(collector), m.BUS_BANDWIDTH.name)
    put(inspector, UUID[2], many_buckets(2, 3).replace(b"} 100\n", b"} 250\n"), age=4.0)
    after = series(render(collector), m.BUS_BANDWIDTH.name)
    assert after == series(render(collectors(node, *flags)), m.BUS_BANDWIDTH.name)   # as read afresh
    mine = [s for s in after if s["uuid"] == f"GPU-{UUID[2]}"]
    assert len(mine) == 4 and {s["value"] for s in mine} == {250e9}
    assert [{**s, "value": 0} for s in before] == [{**s, "value": 0} for s in after]
    # the GPU's job changes, its file does not: the same buckets, served with the new job
    buckets = fmt.parse(many_buckets(2, 3))
    options = NcclInspectorOptions(max_message_sizes=2)
    first = served(buckets, Placement("2", f"GPU-{UUID[2]}", "4242"), options, None)
    assert served(buckets, Placement("2", f"GPU-{UUID[2]}", "4242"), options, first) is first
    moved = served(buckets, Placement("2", f"GPU-{UUID[2]}", "5151"), options, first)
    assert {labels[0] for _, group in moved.series for _, labels, _, _ in group} == {"5151"}


def test_the_file_cap_reads_the_first_files_by_name(node, collectors):
    text = render(collectors(node, "--nccl-inspector.max-files=2"))
    assert value(text, m.CAPPED.name, cap="files") == 1
    assert value(text, m.FILES.name, state="served") == 2


@pytest.mark.parametrize("flag", ["--nccl-inspector.max-age=0", "--nccl-inspector.max-communicators=0",
                                  "--nccl-inspector.max-file-bytes=-1", "--nccl-inspector.max-message-sizes=0"])
def test_bad_flags_name_themselves(flag):
    with pytest.raises(ValueError, match=flag.split("=")[0]):
        registry.load()["nccl-inspector"].factory(exporter_config("--collector.nccl-inspector", flag))


# ------------------------------------------------------------------------------------------ Kubernetes

TOKEN = "node-agent"


@pytest.fixture
async def kube_node(node):
    """node00 presented the Kubernetes way: a JobSet pod holding GPU 0, the kubelet socket and the API server."""
    root = Path(tempfile.mkdtemp(prefix="k8s", dir="/tmp"))     # a unix socket path stays under 108 bytes
    shutil.copytree(node, root / "node00")
    shutil.rmtree(root / "node00" / "gpu-jobs")
    labels = {"jobset.sigs.k8s.io/jobset-name": "llama-pretrain", "jobset.sigs.k8s.io/replicatedjob-name": "node",
              "batch.kubernetes.io/job-completion-index": "0", "batch.kubernetes.io/job-name": "llama-pretrain-node-0"}
    pod = SimPod("ml-team", "llama-pretrain-node-0-0-abcde", "node00",
                 (SimContainer("node", (f"GPU-{UUID[0]}",)),), labels, owner=("batch/v1", "Job", "llama-pretrain-node-0"))
    kubelet = Kubelet(root / "node00" / "kubelet.sock", lambda: [pod]).start()
    store = PodStore()
    store.replace([pod])
    port = stack_mod.free_port()
    (root / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "agent", "user": {"token": TOKEN}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}]}))
    runner = web.AppRunner(create_app(store, [TOKEN]), access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield root / "node00"
    kubelet.stop()
    await runner.cleanup()
    shutil.rmtree(root, ignore_errors=True)


async def test_a_kubernetes_jobs_series_carry_its_namespace_and_name(kube_node):
    config = exporter_config("--collector.disable-defaults", "--collector.nccl-inspector", "--jobs.source=kubernetes",
                             f"--sim.node-root={kube_node}")
    collector = registry.load()["nccl-inspector"].factory(config)
    collector.clock = lambda: NOW
    try:
        deadline = time.monotonic() + 30
        while True:
            text = await asyncio.to_thread(render, collector)
            if value(text, m.BUS_BANDWIDTH.name, gpu="0", job_id="ml-team/llama-pretrain") or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert value(text, m.BUS_BANDWIDTH.name, gpu="0", job_id="ml-team/llama-pretrain",
                     collective="AllReduce") == 678.263e9
        assert value(text, m.FILE_AGE.name, gpu="0", job_id="ml-team/llama-pretrain") == 5
        assert value(text, m.ALGORITHM_BANDWIDTH.name, gpu="1", job_id="") == 238.609e9      # no pod holds GPU 1
    finally:
        collector.close()


# ------------------------------------------------------------------------------------------ the real agent

def start_agent(workdir: Path, *flags: str) -> stack_mod.Service:
    return stack_mod.start_on_port("lockstep-exporter", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults", "--collector.nccl-inspector", "--jobs.source=slurm", *flags],
        workdir, ready_path="/metrics", timeout=60)


@pytest.mark.integration
def test_the_agent_serves_inspector_files_over_http(stack, node, tmp_path):
    for path in (node / "nccl-inspector").glob("*.prom"):
        os.utime(path)                                              # written just now, as far as the agent knows
    time.sleep(0.3)
    agent = stack.add(start_agent(tmp_path / "agent", f"--sim.node-root={node}"))
    status, body = stack_mod.http_get(agent.url + "/metrics", timeout=10)
    text = body.decode()
    assert status == 200
    assert value(text, m.BUS_BANDWIDTH.name, job_id="4242", gpu="0", collective="AllReduce") == 678.263e9
    assert value(text, "lockstep_scrape_collector_success", collector="nccl-inspector") == 1
    list(text_string_to_metric_families(text))
