"""The jobs collector the Kubernetes way, in a real node agent scrape: the simulated kubelet (gRPC on a
unix socket, the real proto) and the simulated API server (list/watch over HTTP, the real JSON shapes).
Every GPU of every pod gets its info series; a GPU no pod holds gets none; and when the kubelet or the
API server fails, the collector says so in its health metric, logs it once, leaves the other collectors
alone and recovers by itself."""
from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from lockstep.exporters.collectors.jobs import jobs_collector
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.toolkit.exposition import render_text
from lockstep.simulator.kubeapi import Faults, PodStore, create_app
from lockstep.simulator.kubelet import Kubelet
from lockstep.simulator.kubepods import SimContainer, SimPod
from lockstep.stack import free_port
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES

FIXTURE = FIXTURES / "gpu/node00/gpus.json"
UUID = [f"GPU-2f6c1c1e-0b3a-4c55-9d7e-00000000000{g}" for g in range(3)]   # the fixture's; GPU 2 fell off the bus
TOKEN = "node-agent"


def trainer(rank: int, gpus: list[int]) -> SimPod:
    """A pod of a JobSet (Trainer v2) job, labels as jobset_controller.go sets them (fixtures README)."""
    labels = {"jobset.sigs.k8s.io/jobset-name": "llama-pretrain", "jobset.sigs.k8s.io/replicatedjob-name": "node",
              "batch.kubernetes.io/job-completion-index": str(rank), "batch.kubernetes.io/job-name": "llama-pretrain-node-0"}
    return SimPod("ml-team", f"llama-pretrain-node-0-{rank}-abcde", "node00",
                  (SimContainer("node", tuple(UUID[g] for g in gpus)), SimContainer("sidecar")), labels,
                  owner=("batch/v1", "Job", "llama-pretrain-node-0"))


NOTEBOOK = SimPod("research", "notebook-7f9c", "node00", (SimContainer("jupyter", (UUID[1],)),), {"app": "jupyter"})


class Node:
    """node00 presented the Kubernetes way: its kubelet, the API server, and a node agent reading both."""

    def __init__(self, root: Path, server_port: int) -> None:
        self.root, self.pods = root, [trainer(0, [0]), NOTEBOOK]
        node = root / "node00"
        node.mkdir(parents=True)
        shutil.copy(FIXTURE, node / "gpus.json")
        self.socket = node / "kubelet.sock"
        self.kubelet = Kubelet(self.socket, lambda: self.pods).start()
        self.store, self.faults = PodStore(), Faults(bookmark_s=0.2)
        self.store.replace(self.pods)
        self.port = server_port
        (root / "kubeconfig").write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": f"http://127.0.0.1:{server_port}"}}],
            "users": [{"name": "agent", "user": {"token": TOKEN}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}]}))
        self.runner: web.AppRunner | None = None

    async def start_api(self) -> None:
        self.runner = web.AppRunner(create_app(self.store, [TOKEN], self.faults), access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop_api(self) -> None:
        await self.runner.cleanup()

    def set_pods(self, pods: list[SimPod]) -> None:
        self.pods = pods
        self.store.replace(pods)


@pytest.fixture
async def node():
    root = Path(tempfile.mkdtemp(prefix="k8s", dir="/tmp"))     # a unix socket path stays under 108 bytes
    n = Node(root, free_port())
    await n.start_api()
    yield n
    n.kubelet.stop()
    await n.stop_api()
    shutil.rmtree(root, ignore_errors=True)


def scraper(node: Node, *flags: str) -> Scraper:
    config = exporter_config(f"--sim.node-root={node.root / 'node00'}", "--jobs.source=kubernetes", *flags)
    from lockstep.exporters.collectors.gpu import gpu_collector
    return Scraper({"gpu": gpu_collector(config), "jobs": jobs_collector(config)})


def scrape(s: Scraper) -> tuple[dict[str, float], list[dict[str, str]]]:
    """(collector → success, the label sets of lockstep_gpu_job_info)."""
    text = render_text(s.families())
    health = {}
    infos = []
    for line in text.splitlines():
        if line.startswith("lockstep_scrape_collector_success{"):
            health[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("lockstep_gpu_job_info{"):
            body = line[line.index("{") + 1:line.rindex("}")]
            infos.append(dict(pair.split("=", 1) for pair in body.replace('"', "").split(",")))
    return health, infos


async def until(s: Scraper, check, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = await asyncio.to_thread(scrape, s)
        if check(*result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}: {result}")
        await asyncio.sleep(0.05)


def jobs_of(infos: list[dict]) -> dict[str, tuple]:
    return {i["gpu"]: (i["job_id"], i["rank"], i["pod"], i["namespace"], i["container"], i["scheduler"]) for i in infos}


async def test_every_gpu_of_every_pod_gets_its_job_and_free_gpus_none(node):
    s = scraper(node)
    try:
        health, infos = await until(s, lambda h, i: len(i) == 2, "the mapping")
        assert health == {"gpu": 1.0, "jobs": 1.0}
        assert jobs_of(infos) == {
            "0": ("ml-team/llama-pretrain", "0", "llama-pretrain-node-0-0-abcde", "ml-team", "node", "kubernetes"),
            "1": ("research/notebook-7f9c", "", "notebook-7f9c", "research", "jupyter", "kubernetes")}
        assert {i["uuid"] for i in infos} == set(UUID[:2])       # GPU 2: no pod holds it, no series
        node.set_pods([trainer(0, [0]), trainer(1, [1])])          # the notebook ends, a second rank starts
        _, infos = await until(s, lambda h, i: jobs_of(i).get("1", ("",))[0] == "ml-team/llama-pretrain", "the change")
        assert jobs_of(infos)["1"][:3] == ("ml-team/llama-pretrain", "1", "llama-pretrain-node-0-1-abcde")
    finally:
        s.close()


async def test_a_missing_kubelet_socket_fails_the_jobs_collector_alone_logs_once_and_recovers(node, caplog):
    caplog.set_level(logging.INFO)
    node.kubelet.stop()
    s = scraper(node)
    try:
        for _ in range(3):
            health, infos = await asyncio.to_thread(scrape, s)
            assert health == {"gpu": 1.0, "jobs": 0.0} and infos == []
        failures = [r for r in caplog.records if r.levelno >= logging.ERROR and "collector failed" in r.getMessage()]
        assert len(failures) == 1 and "kubelet.sock not found" in failures[0].fields["err"]
        node.kubelet.start()
        await until(s, lambda h, i: h["jobs"] == 1.0 and len(i) == 2, "recovery")
        assert any(r.getMessage() == "collector recovered" for r in caplog.records)
    finally:
        s.close()


async def test_rbac_forbidden_fails_until_granted(node, caplog):
    node.faults.forbidden = True
    s = scraper(node)
    try:
        health, infos = await until(s, lambda h, i: h["jobs"] == 0.0, "the failure")
        assert infos == [] and health["gpu"] == 1.0
        await until(s, lambda h, i: any("403 Forbidden" in r.getMessage() + str(getattr(r, "fields", ""))
                                        for r in caplog.records), "the log naming the refusal")
        node.faults.forbidden = False
        await until(s, lambda h, i: h["jobs"] == 1.0 and len(i) == 2, "recovery")
    finally:
        s.close()


async def test_api_server_down_keeps_the_known_pods_reports_failure_and_recovers(node):
    s = scraper(node, "--jobs.kubernetes.api-timeout=1")
    try:
        await until(s, lambda h, i: h["jobs"] == 1.0 and len(i) == 2, "the mapping")
        await node.stop_api()
        node.set_pods([trainer(0, [0]), trainer(1, [1])])         # meanwhile: the notebook ends, rank 1 starts
        health, infos = await until(s, lambda h, i: h["jobs"] == 0.0 and "1" not in jobs_of(i), "the failure")
        # the kubelet still says which GPUs are held; rank 1's pod is not known yet, so its GPU waits
        assert set(jobs_of(infos)) == {"0"} and health["gpu"] == 1.0
        await node.start_api()
        await until(s, lambda h, i: h["jobs"] == 1.0 and jobs_of(i).get("1", ("",))[1] == "1", "recovery")
    finally:
        s.close()


async def test_a_slow_api_server_is_a_failure_until_it_answers_in_time(node):
    node.faults.delay_s = 2.0
    s = scraper(node, "--jobs.kubernetes.api-timeout=0.5")
    try:
        health, infos = await until(s, lambda h, i: h["jobs"] == 0.0, "the failure")
        assert infos == [] and health["gpu"] == 1.0
        node.faults.delay_s = 0.0
        await until(s, lambda h, i: h["jobs"] == 1.0 and len(i) == 2, "recovery")
    finally:
        s.close()


async def test_a_pod_deleted_mid_scrape_loses_only_its_gpus(node):
    s = scraper(node)
    try:
        await until(s, lambda h, i: len(i) == 2, "the mapping")
        # The kubelet has let the notebook go, the API server's DELETED event has not arrived yet (and
        # the other way round): the kubelet decides what is held; nothing fails.
        node.pods = [trainer(0, [0])]
        health, infos = await asyncio.to_thread(scrape, s)
        assert health["jobs"] == 1.0 and set(jobs_of(infos)) == {"0"}
        node.pods = [trainer(0, [0]), NOTEBOOK]
        node.store.delete("research", "notebook-7f9c")
        health, infos = await until(s, lambda h, i: "1" not in jobs_of(i), "the deletion seen")
        assert health["jobs"] == 1.0 and set(jobs_of(infos)) == {"0"}
    finally:
        s.close()


def test_auto_picks_kubernetes_where_the_kubelet_socket_is_and_slurm_elsewhere(tmp_path, monkeypatch):
    from lockstep.exporters.collectors.jobs import JobsOptions
    from lockstep.exporters.config import ExporterConfig
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    flags = {"jobs.kubernetes.kubelet-socket": str(tmp_path / "kubelet.sock")}
    assert JobsOptions.from_config(ExporterConfig(flags=flags)).source == "slurm"
    (tmp_path / "kubelet.sock").touch()
    assert JobsOptions.from_config(ExporterConfig(flags=flags)).source == "kubernetes"
    (tmp_path / "kubelet.sock").unlink()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert JobsOptions.from_config(ExporterConfig(flags=flags)).source == "kubernetes"
    assert JobsOptions.from_config(ExporterConfig(flags={**flags, "jobs.source": "slurm"})).source == "slurm"


async def test_job_io_names_a_pods_cgroup_by_its_job(node):
    """The ``job-io`` collector asks the same mapping which job a pod's cgroup (named by the pod's UID, as the
    kubelet's systemd driver names it) belongs to; a pod holding no GPU is left out."""
    from lockstep.exporters.collectors.job_io import job_io

    slices = node.root / "node00/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice"
    stat = (FIXTURES / "cgroup/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242/io.stat").read_text()
    trainer_pod, idle = trainer(0, [0]), SimPod("ml-team", "data-loader", "node00", (SimContainer("loader"),), {})
    node.set_pods([trainer_pod, NOTEBOOK, idle])
    for pod in (trainer_pod, NOTEBOOK, idle):
        group = slices / f"kubepods-burstable-pod{pod.uid.replace('-', '_')}.slice"
        group.mkdir(parents=True)
        (group / "io.stat").write_text(stat)
    s = Scraper({"job-io": job_io(exporter_config(f"--sim.node-root={node.root / 'node00'}", "--jobs.source=kubernetes"))})

    def jobs(text: str) -> dict[str, str]:
        return {line.split('pod_uid="')[1].split('"')[0]: line.split('job_id="')[1].split('"')[0]
                for line in text.splitlines() if line.startswith("lockstep_job_io_read_bytes_total{")}
    try:
        deadline = time.monotonic() + 30
        while 'lockstep_scrape_collector_success{collector="job-io"} 1' not in (text := render_text(s.families())):
            assert time.monotonic() < deadline, text
            await asyncio.sleep(0.05)
        assert jobs(text) == {trainer_pod.uid: "ml-team/llama-pretrain", NOTEBOOK.uid: "research/notebook-7f9c"}
    finally:
        s.close()
