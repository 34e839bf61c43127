"""``lockstep sim run``: the model in (optionally accelerated) real time.

Tick k is written at wall time ``start + k * P / speed`` with simulated time ``t = k * P`` and
timestamp ``start + t`` (start = wall clock at launch): at ``--speed 10`` counters advance ten
simulated seconds per wall second. File writing runs in a worker thread; the Redfish service
answers from the latest tick's snapshot.
"""
from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from aiohttp import web

from lockstep.exporters.catalog.simlayout import SimCluster
from lockstep.exporters.toolkit.listen import ListenAddress
from lockstep.simulator import redfish, storagesys, storagesys_app
from lockstep.simulator.collectives import DEAD, RankModel
from lockstep.simulator.inspector import InspectorWriter
from lockstep.simulator.kube import KubeNodes
from lockstep.simulator.model import Model
from lockstep.simulator.ncclras import RasService
from lockstep.simulator.scenario import Scenario
from lockstep.simulator.state import State
from lockstep.simulator.steps import StepSender
from lockstep.simulator.topology import Topology
from lockstep.simulator.tree import cgroup, ethtool, gpus, procfs, slurm, sysfs
from lockstep.simulator.tree.files import TreeWriter
from lockstep.simulator.validation import ValidationWriter
from lockstep.validation.store import Store


class RasNodes:
    """A simulated NCCL RAS service per job node (127.0.0.1, a port of its own, written to the node's
    ``nccl-ras.address``), serving the job as its collectives stand at each tick (``collectives``)."""

    def __init__(self, topo: Topology) -> None:
        self.model = RankModel(topo)
        self.services = {topo.nodes[i]: RasService(self.model.job).start() for i in self.model.nodes}

    def follow(self, s: State) -> None:
        answer = self.model.now(s)
        missing = answer.status.missing
        self.model.job.follow(np.nan_to_num(answer.entered, nan=0.0).astype(int),
                              np.flatnonzero(missing > 0), np.flatnonzero(missing == DEAD))

    def stop(self) -> None:
        for service in self.services.values():
            service.stop()


class TreeSink:
    """Writes every node's source trees for one ``State`` (and, presented the Kubernetes way, moves the
    kubelets and the API server to its time instead of writing the Slurm prolog's files); the job's RAS
    services follow it."""

    def __init__(self, topo: Topology, root: Path, job_id: str, kube: KubeNodes | None = None,
                 nccl_inspector: str | None = None, ras: RasNodes | None = None) -> None:
        self.topo, self.cluster, self.writer, self.job_id = topo, SimCluster(Path(root)), TreeWriter(), job_id
        self.nodes = [self.cluster.node(name) for name in topo.nodes]
        # The ranks' own reports: NCCL Inspector's files (a version, or None: off) and their step ends. Under
        # Kubernetes a process knows no Slurm job: the agent names the job from the GPU's pod.
        slurm_job = job_id if kube is None else ""
        self.inspector = None if nccl_inspector is None else InspectorWriter(topo, self.nodes, nccl_inspector,
                                                                               slurm_job)
        self.steps = StepSender(topo, self.nodes, slurm_job)
        self.first = True
        self.validation = None
        if topo.scenario.validation is not None:
            self.validation = ValidationWriter(topo.scenario, topo, Store(self.cluster.validation_results, durable=False))
        self.kube = kube
        self.ras = ras
        self.cgroups = cgroup.CgroupWriter(topo, job_id)   # the job's cgroup: its Slurm job's, or its pod's

    def write(self, s: State) -> None:
        w, topo = self.writer, self.topo
        if self.ras is not None:
            self.ras.follow(s)
        for n, node in enumerate(self.nodes):
            if self.first:
                sysfs.write_static(w, topo, node, n)
                if self.kube is None:
                    slurm.write(w, topo, node, n, self.job_id)
                if self.ras is not None and node.name in self.ras.services:
                    w.put(str(node.nccl_ras_address), f"{self.ras.services[node.name].address}\n".encode())
            sysfs.write_counters(w, topo, node, n, s)
            ethtool.write(w, topo, node, n, s, self.first)
            procfs.write(w, topo, node, n, s, self.first)
            self.cgroups.write(w, node, n, s, self.kube.pods if self.kube is not None else None)
            gpus.write(w, topo, node, n, s)
        if self.inspector is not None:
            self.inspector.write(s)
        self.steps.send(s)
        if self.validation is not None:
            if self.first:
                self.validation.history(s.timestamp - s.t)
            self.validation.tick(s.t, s.timestamp)
        if self.kube is not None:
            self.kube.update(s.t)
        self.first = False


def cluster_doc(scenario: Scenario, topo: Topology, start: float, speed: float, url: str) -> dict:
    return {
        "scenario": scenario.name, "seed": scenario.seed, "start_timestamp": start,
        "sample_period_s": scenario.sample_period_s, "speed": speed, "redfish_url": url,
        "job": {"job_id": scenario.job.job_id, "nodes": list(scenario.job.nodes)},
        "nodes": [{"name": node, "rack": topo.rack_of(i), "root": node, "redfish": f"{url}/{node}",
                   "address": topo.address(i),
                   "gpus": [{"index": g, "uuid": str(topo.identity["uuid"][i * topo.gpus_per_node + g]),
                             "hca": topo.hca(g), "port": 1, "interface": topo.iface(g)}
                            for g in range(topo.gpus_per_node)]}
                  for i, node in enumerate(topo.nodes)],
        "racks": [{"name": r, "pdu": topo.pdu_name(r), "redfish": f"{url}/{topo.pdu_name(r)}",
                   "budget_watts": scenario.cluster.rack_budget_watts,
                   "nodes": [n for i, n in enumerate(topo.nodes) if topo.rack_of(i) == r]} for r in topo.racks],
        "cdu": {"name": topo.cdu_name, "redfish": f"{url}/{topo.cdu_name}"},
    }


def power_config(scenario: Scenario, topo: Topology, url: str) -> dict:
    targets = []
    for name, (kind, rack) in redfish.kinds(topo).items():
        target = {"name": name, "kind": kind, "url": f"{url}/{name}"}
        if rack:
            target["rack"] = rack
        if kind == "pdu":
            target["budget_watts"] = scenario.cluster.rack_budget_watts
        targets.append(target)
    interval = min(15.0, scenario.sample_period_s)
    # the per-request timeout stays below the poll interval (docs/architecture.md: below the scrape timeout)
    return {"interval_s": interval, "timeout_s": round(min(5.0, 0.8 * interval), 1), "targets": targets}


async def run_live(scenario: Scenario, root: Path, speed: float, listen: ListenAddress,
                   duration_s: float | None, scheduler: str = "slurm", counters: dict | None = None,
                   nccl_inspector: str | None = "2.30") -> int:
    start = time.time()
    model = Model(scenario, start_timestamp=start, counters=counters)
    ticks = None if duration_s == 0 else int((duration_s or scenario.duration_s) // scenario.sample_period_s) + 1
    states = model.states(ticks)
    state = next(states)
    current = [redfish.snapshot_of(state)]
    systems, access = storagesys.Systems(state, scenario.sample_period_s), storagesys_app.Access()
    kube: KubeNodes | None = None
    ras: RasNodes | None = None
    sink: TreeSink | None = None
    app = redfish.create_app(model.topo, lambda: current[0])
    storagesys_app.add_routes(app, systems, access)   # the storage systems, on the same address
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        host = listen.host or "127.0.0.1"
        try:
            await web.TCPSite(runner, host, listen.port).start()
        except OSError as exc:  # before anything is written
            print(f"lockstep sim: cannot listen on {listen}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        url = f"http://{host}:{runner.addresses[0][1]}"
        root.mkdir(parents=True, exist_ok=True)
        if scheduler == "kubernetes":
            kube = KubeNodes(model.topo, SimCluster(root))
            await kube.start(host, state.t)
        ras = RasNodes(model.topo)
        sink = TreeSink(model.topo, root, scenario.job.job_id, kube, nccl_inspector, ras)
        await asyncio.to_thread(sink.write, state)
        _announce(sink, scenario, model.topo, start, speed, url, access)
        await _tick_loop(states, sink, current, systems, start, scenario.sample_period_s / speed)
    finally:
        if kube is not None:
            await kube.stop()
        if ras is not None:
            ras.stop()
        if sink is not None:
            sink.steps.close()
        await runner.cleanup()
    print("lockstep sim: stopped", file=sys.stderr, flush=True)
    return 0


def _announce(sink: TreeSink, scenario: Scenario, topo: Topology, start: float, speed: float, url: str,
              access: storagesys_app.Access) -> None:
    """Write power-exporter.yaml, storage-exporter.yaml with its password files, and cluster.json (the "ready"
    mark, last), and say where things are."""
    cluster = sink.cluster
    root = cluster.root
    sink.writer.put(str(cluster.power_config),
                    yaml.safe_dump(power_config(scenario, topo, url), sort_keys=False).encode())
    storagesys_app.write_credentials(root, access)
    storage_config = root / storagesys_app.CONFIG
    sink.writer.put(str(storage_config), yaml.safe_dump(storagesys_app.exporter_config(url, scenario.sample_period_s),
                                                         sort_keys=False).encode())
    doc = cluster_doc(scenario, topo, start, speed, url)
    if sink.kube is not None:
        doc.update(scheduler="kubernetes", kubernetes_api=sink.kube.url, kubeconfig=str(cluster.kubeconfig))
    sink.writer.put(str(cluster.cluster_doc), json.dumps(doc, indent=1).encode())
    print(f"lockstep sim: scenario {scenario.name}: {len(topo.nodes)} nodes x {topo.gpus_per_node} GPUs, "
          f"period {scenario.sample_period_s:g} s, speed {speed:g}x\n"
          f"  trees:      {root}/<node>/ (sys, proc, ethtool, gpus.json)\n"
          f"  cluster:    {cluster.cluster_doc}\n  redfish:    {url}/<device>/redfish/v1\n"
          f"  power cfg:  {cluster.power_config}\n"
          f"  storage:    {url}{storagesys.MINIO_PATH} (MinIO), {url}{storagesys.VAST_PATH} (VAST), "
          f"{url}{storagesys.WEKA_PATH} (WEKA); config {storage_config}\n"
          f"  nccl ras:   {root}/<node>/nccl-ras.address (the job's nodes: a RAS service each)" + (
              f"\n  kubernetes: {sink.kube.url} (pods), {root}/<node>/kubelet.sock, {cluster.kubeconfig}"
              if sink.kube is not None else ""), flush=True)


async def _tick_loop(states, sink: TreeSink, current: list, systems: storagesys.Systems, start: float,
                     wall_period: float) -> None:
    """Write each tick at its wall time until the run ends or SIGINT/SIGTERM arrives."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        for state in states:
            if await _sleep_until(stop, start + state.k * wall_period):
                return
            await asyncio.to_thread(sink.write, state)
            current[0] = redfish.snapshot_of(state)
            systems.advance(state)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _sleep_until(stop: asyncio.Event, when: float) -> bool:
    """Wait for ``when`` (wall clock); True if asked to stop first."""
    delay = when - time.time()
    if delay > 0:
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except asyncio.TimeoutError:
            pass
    return stop.is_set()


