"""Start the demo's processes in dependency order on top of ``lockstep.localcluster``: simulator →
node agents (in parallel), power exporter and storage exporter → rules → Alertmanager → Prometheus → analytics."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml

from lockstep import localcluster as lc
from lockstep.demo_config import KUBE_JOB_ID, DemoConfig
from lockstep.stack import Service, Stack, start_alertmanager, start_prometheus

# Alert timings shortened for a live demo (the site defaults wait minutes before paging).
DEMO_FOR = {"PFCPauseStorm": "15s", "TrainingJobStraggler": "30s", "TrainingJobStalled": "30s",
            "TrainingJobHung": "30s", "TrainingJobMemberLost": "30s", "CheckpointStallExcessive": "1m",
            "ExporterDown": "30s"}


def demo_scenario(config: DemoConfig) -> Path:
    """The scenario as given, or cut to ``--nodes`` nodes (faults on removed nodes dropped), its job named
    ``<namespace>/<name>`` when presented the Kubernetes way."""
    doc = yaml.safe_load(config.scenario.read_text())
    kube_id = config.scheduler == "kubernetes" and "/" not in str(doc["job"]["job_id"])
    if config.nodes is None and not kube_id:
        return config.scenario
    if kube_id:
        doc["job"]["job_id"] = KUBE_JOB_ID
    if config.nodes is not None:
        doc["cluster"]["nodes"] = config.nodes
        doc["job"]["nodes"] = min(config.nodes, int(doc["job"].get("nodes", config.nodes)))
        keep = {f"node{i:02d}" for i in range(config.nodes)}
        doc["faults"] = [f for f in doc.get("faults", []) if f.get("node", "node00") in keep]
    path = config.workdir / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def history(config: DemoConfig, scenario: Path) -> list[str]:
    """Backfill the cluster's past ``history_days`` into a fresh Prometheus data dir (what a previous
    demo left there goes); the simulator's arguments that continue its counters."""
    from lockstep.demo_history import STEP_S, backfill_month
    prometheus = config.workdir / "prometheus"
    shutil.rmtree(prometheus / "data", ignore_errors=True)
    started = time.monotonic()
    print(f"backfilling {config.history_days:g} days of history (every {STEP_S:g} s)...", flush=True)
    month, counters = backfill_month(yaml.safe_load(scenario.read_text())["cluster"], prometheus,
                                     config.history_days, time.time())
    print(f"  {month.samples:,} samples in {time.monotonic() - started:.0f} s", flush=True)
    return ["--counters-from", str(counters)]


def build_rules(config: DemoConfig, pager_url: str) -> tuple[Path, Path]:
    """The alerts package's rules and Alertmanager config, routed to the demo pager, with short ``for:``."""
    from lockstep.alerts import build
    from lockstep.alerts.config import load
    site = {"evaluation_interval": "5s", "thresholds": {"pfc_window": "1m"},
            "alertmanager": {"pager_webhook_url": f"{pager_url}/pager", "queue_webhook_url": f"{pager_url}/queue",
                             "group_wait": "5s", "group_interval": "30s", "repeat_interval": "1h"},
            "for": DEMO_FOR}
    out = config.workdir / "rules"
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo-alerts.yaml").write_text(yaml.safe_dump(site, sort_keys=False))
    build.write(load(out / "demo-alerts.yaml"), out)
    return out / build.RULES_FILE, out / build.ALERTMANAGER_FILE


def start_all(config: DemoConfig, stack: Stack, pager_url: str) -> dict[str, Service]:
    """Every component, ready; keys are the names shown in the status table."""
    root, ports = config.workdir / "cluster", config.ports
    if (root / "cluster.json").exists():  # a previous demo in the same --workdir: start from a fresh tree
        shutil.rmtree(root)
    (config.workdir / "pages.jsonl").unlink(missing_ok=True)
    scenario = demo_scenario(config)
    continued = history(config, scenario) if config.history_days else []
    # A port of 0 is None to the helpers: each picks a free port and, should another process take it
    # before the bind, another one.
    port = {name: value or None for name, value in ports.items()}
    sim = lc.start_sim(scenario, root, stack, speed=config.speed, redfish_port=port["redfish_port"],
                       extra_args=["--duration", "0", "--scheduler", config.scheduler, *continued])
    services = {"simulator (Redfish, storage)": sim}
    # Every agent reads its node's NCCL RAS service (the simulator runs one per job node), polled at the scrape
    # interval, so a hung rank is named on the dashboard and in its page.
    agents = lc.start_node_agents(root, stack, base_port=config.base_port or None, log_dir=config.workdir / "logs",
                                  extra_args=("--collector.nccl-ras", "--nccl-ras.poll-interval=5"))
    services.update({f"node agent {n}": s for n, s in agents.items()})
    services["power exporter"] = lc.start_power_exporter(root / "power-exporter.yaml", stack,
                                                         port["power_port"], config.workdir / "logs")
    # the simulator's MinIO, VAST and WEKA (simulator/storagesys.py), on its own address
    services["storage exporter"] = lc.start_storage_exporter(root / "storage-exporter.yaml", stack,
                                                             port["storage_port"], config.workdir / "logs")
    rules, am_config = build_rules(config, pager_url)
    services["alertmanager"] = stack.add(start_alertmanager(am_config.read_text(), config.workdir / "alertmanager",
                                                            port["alertmanager_port"]))
    prom_config = lc.prometheus_config(
        {n: lc.host_port(s) for n, s in agents.items()}, power_target=lc.host_port(services["power exporter"]),
        storage_target=lc.host_port(services["storage exporter"]),
        rule_files=[rules], alertmanager=lc.host_port(services["alertmanager"]), scrape_interval="5s",
        cluster="demo")
    services["prometheus"] = stack.add(start_prometheus(prom_config, config.workdir / "prometheus",
                                                        port["prometheus_port"]))
    services["analytics"] = lc.start_analytics(services["prometheus"], prom_config, config.workdir / "logs", stack,
                                               "--interval=10", "--step=5", port=port["analytics_port"],
                                               ready_path="/-/healthy")
    return services


def wait_targets_up(prometheus_url: str, expected: int, timeout: float = 120.0) -> list[dict]:
    """Poll ``/api/v1/targets`` until ``expected`` active targets report health "up"."""
    from lockstep.stack import http_get
    deadline, targets = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        targets = json.loads(http_get(f"{prometheus_url}/api/v1/targets?state=active")[1])["data"]["activeTargets"]
        if len(targets) >= expected and all(t["health"] == "up" for t in targets):
            return targets
        time.sleep(1)
    down = [f"{t['scrapeUrl']}: {t['health']} {t.get('lastError', '')}" for t in targets if t["health"] != "up"]
    raise RuntimeError(f"Prometheus targets not all up after {timeout:.0f}s: {down}")


def stop_all(stack: Stack, timeout: float = 10.0) -> None:
    """SIGTERM every process group (each service runs in its own session), newest first; SIGKILL the
    group of any that outlives ``timeout``. Groups are signalled only while their leader is unreaped,
    so a recycled process id is never hit."""
    services = list(reversed(stack.services))
    for s in services:
        _signal_group(s.proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for s in services:
        try:
            s.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(s.proc, signal.SIGKILL)
            s.proc.wait(5)
    stack.services.clear()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
