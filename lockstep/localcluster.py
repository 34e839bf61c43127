"""A simulated cluster on this machine: the simulator, one node agent per simulated node, the power
exporter, the storage exporter, and Prometheus configured for them, or a Prometheus filled from a simulated series.

Shared by the demo, the integration tests and the benchmarks so they all wire things the same way
(the scrape jobs of ``lockstep.exporters.catalog.selectors``, which the rules, dashboards and analytics select
on; every node-agent target carries a ``node`` label).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from lockstep.backfill.blocks import backfill  # noqa: F401  (filling a Prometheus: kept importable here)
from lockstep.backfill.rules import backfill_rules  # noqa: F401
from lockstep.exporters.catalog.selectors import ANALYTICS_JOB, NODE_JOB, POWER_JOB, STORAGE_JOB
from lockstep.stack import (
    Service,
    Stack,
    bind_failed,
    free_port,
    on_free_port,
    reload_prometheus,
    start_on_port,
    start_process,
    wait_ready,
)

LOCKSTEP = [sys.executable, "-m", "lockstep"]


def start_sim(scenario: str | Path, root: Path, stack: Stack, speed: float = 1.0,
              redfish_port: int | None = None, extra_args: Sequence[str] = (), timeout: float = 60.0) -> Service:
    """Run ``lockstep sim run`` in the background; ready once it has written ``root/cluster.json``."""
    def start(port: int) -> Service:
        argv = [*LOCKSTEP, "sim", "run", str(scenario), "--root", str(root), "--speed", str(speed),
                "--redfish-listen", f"127.0.0.1:{port}", *extra_args]
        service = start_process("sim", argv, root.parent / f"{root.name}-logs", f"http://127.0.0.1:{port}",
                                ready_path=None)
        deadline = time.monotonic() + timeout
        while not (root / "cluster.json").exists():
            if not service.alive() or time.monotonic() > deadline:
                service.stop()
                raise RuntimeError(f"simulator did not start:\n{service.log_tail()}")
            time.sleep(0.1)
        return service
    return stack.add(on_free_port(start, redfish_port))


def sim_nodes(root: Path) -> list[str]:
    """Node names of a running simulation, from cluster.json (or the node directories)."""
    try:
        nodes = json.loads((root / "cluster.json").read_text()).get("nodes")
    except (OSError, ValueError):
        nodes = None
    if nodes:
        return [n if isinstance(n, str) else n["name"] for n in nodes]
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "sys").is_dir())


def gpus_per_node(root: Path) -> dict[str, int]:
    """``{node: GPUs}`` of a running simulation (empty without cluster.json)."""
    try:
        nodes = json.loads((root / "cluster.json").read_text()).get("nodes") or []
    except (OSError, ValueError):
        return {}
    return {n["name"]: len(n.get("gpus", ())) for n in nodes if isinstance(n, dict)}


def start_node_agents(root: Path, stack: Stack, nodes: Sequence[str] | None = None,
                      base_port: int | None = None, extra_args: Sequence[str] = (),
                      log_dir: Path | None = None) -> dict[str, Service]:
    """One ``lockstep exporter --sim.node-root root/<node>`` per node; ports from ``base_port`` up
    (free ephemeral ports when None). All start at once (Python start-ups in parallel), then each is
    waited for until it serves /metrics. Each agent expects the GPUs cluster.json gives its node (as a
    site would pass its node's GPU count), unless ``extra_args`` says otherwise."""
    expected = gpus_per_node(root) if not any(a.startswith("--gpu.expected-count") for a in extra_args) else {}

    def start(node: str, port: int, ready: bool) -> Service:
        argv = [*LOCKSTEP, "exporter", f"--sim.node-root={root / node}", f"--web.listen-address=127.0.0.1:{port}",
                *([f"--gpu.expected-count={expected[node]}"] if node in expected else []), *extra_args]
        return start_process(f"exporter-{node}", argv, log_dir or root.parent / f"{root.name}-logs",
                             f"http://127.0.0.1:{port}", ready_path="/metrics" if ready else None, timeout=120)

    agents: dict[str, Service] = {}
    for i, node in enumerate(nodes or sim_nodes(root)):
        agents[node] = stack.add(start(node, base_port + i if base_port else free_port(), ready=False))
    for node, service in agents.items():
        try:
            wait_ready(service, "/metrics", timeout=120)
        except RuntimeError as exc:
            if base_port or not bind_failed(exc):
                raise
            agents[node] = stack.add(on_free_port(lambda port, node=node: start(node, port, ready=True), None))
    return agents


def start_power_exporter(config: Path, stack: Stack, port: int | None = None, workdir: Path | None = None) -> Service:
    return stack.add(start_on_port("power-exporter", lambda p: [
        *LOCKSTEP, "power-exporter", f"--config={config}", f"--web.listen-address=127.0.0.1:{p}"],
        workdir or config.parent, port, ready_path="/metrics"))


def start_storage_exporter(config: Path, stack: Stack, port: int | None = None, workdir: Path | None = None) -> Service:
    """``lockstep storage-exporter`` on ``config`` (the simulator writes ``DIR/storage-exporter.yaml``)."""
    return stack.add(start_on_port("storage-exporter", lambda p: [
        *LOCKSTEP, "storage-exporter", f"--config={config}", f"--web.listen-address=127.0.0.1:{p}"],
        workdir or config.parent, port, ready_path="/metrics"))


def prometheus_config(node_targets: Mapping[str, str], *, power_target: str | None = None,
                      storage_target: str | None = None, rule_files: Sequence[Path] = (),
                      alertmanager: str | None = None, scrape_interval: str = "5s",
                      evaluation_interval: str | None = None, cluster: str = "sim") -> dict[str, Any]:
    """A prometheus.yml (as a dict) for a local simulated cluster. ``node_targets`` maps node name to
    ``host:port``; each target gets its ``node`` label as the conventions require. The analytics service,
    which queries this Prometheus, joins it once started (``start_analytics``)."""
    scrape = [{"job_name": NODE_JOB, "static_configs": [
        {"targets": [address], "labels": {"node": node}} for node, address in node_targets.items()]}]
    if power_target:
        scrape.append(scrape_job(POWER_JOB, power_target))
    if storage_target:
        scrape.append(scrape_job(STORAGE_JOB, storage_target))
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                   "evaluation_interval": evaluation_interval or scrape_interval,
                   "external_labels": {"cluster": cluster}},
        "scrape_configs": scrape,
    }
    if rule_files:
        config["rule_files"] = [str(p) for p in rule_files]
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return config


def scrape_job(name: str, target: str) -> dict[str, Any]:
    return {"job_name": name, "static_configs": [{"targets": [target]}]}


def start_analytics(prometheus: Service, config: dict[str, Any], workdir: Path, stack: Stack, *flags: str,
                    port: int | None = None, ready_path: str = "/metrics") -> Service:
    """``lockstep analytics serve`` on ``port`` (None: a free one), querying ``prometheus``, which then
    scrapes it too: ``config`` (the prometheus.yml that Prometheus runs) gains the analytics job and is
    reloaded. The service has bound its port before Prometheus is told it, so no other process can take
    the port in between, as it could one picked ahead for both."""
    service = stack.add(start_on_port("analytics", lambda p: [
        *LOCKSTEP, "analytics", "serve", f"--prometheus-url={prometheus.url}",
        f"--web.listen-address=127.0.0.1:{p}", *flags], workdir, port, ready_path=ready_path))
    job = scrape_job(ANALYTICS_JOB, host_port(service))
    reload_prometheus(prometheus, {**config, "scrape_configs": [*config["scrape_configs"], job]})
    return service


def host_port(service: Service) -> str:
    return service.url.split("://", 1)[1]

