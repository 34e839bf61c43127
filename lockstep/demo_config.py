"""``lockstep demo`` options: one frozen config from argparse, and the port check done before anything starts."""
from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lockstep.stack import free_port, port_in_use

SCENARIO = Path(__file__).resolve().parent.parent / "simulator" / "scenarios" / "demo.yaml"
KUBE_JOB_ID = "ml-team/llama-pretrain"   # the demo's job presented the Kubernetes way
GRAFANA_DIR = Path(__file__).resolve().parent.parent / "deploy" / "grafana"

# (flag, dest, default, component): 0 picks a free ephemeral port.
PORTS = (("--prometheus-port", "prometheus_port", 9090, "Prometheus"),
         ("--alertmanager-port", "alertmanager_port", 9093, "Alertmanager"),
         ("--power-port", "power_port", 9841, "power exporter"),
         ("--analytics-port", "analytics_port", 9842, "analytics"),
         ("--storage-port", "storage_port", 9847, "storage exporter"),
         ("--pager-port", "pager_port", 9845, "demo pager (webhook receiver)"),
         ("--redfish-port", "redfish_port", 9848, "simulated Redfish service"),
         ("--grafana-port", "grafana_port", 3000, "Grafana"))


@dataclass(frozen=True)
class DemoConfig:
    scenario: Path
    workdir: Path
    speed: float
    duration_s: float | None
    nodes: int | None
    ports: dict[str, int]
    base_port: int
    grafana: bool
    scheduler: str = "slurm"
    history_days: float = 30.0      # backfilled before the live run (0: none)

    def node_port(self, i: int) -> int:
        return self.base_port + i if self.base_port else 0


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", type=Path, default=SCENARIO, help="simulator scenario (default: the 16x8 demo)")
    p.add_argument("--workdir", type=Path, help="where the simulated trees, configs and logs go (default: a temp dir)")
    p.add_argument("--speed", type=float, default=2.0, help="simulated seconds per wall second (default 2)")
    p.add_argument("--duration", type=float, help="stop by itself after this many seconds (default: until Ctrl-C)")
    p.add_argument("--nodes", type=int, help="simulate only the first N nodes (for small machines)")
    for flag, dest, default, what in PORTS:
        p.add_argument(flag, dest=dest, type=int, default=default, help=f"{what} port (default {default}; 0: any free)")
    p.add_argument("--base-port", type=int, default=9850,
                   help="first node exporter port, one per node upwards (default 9850; 0: any free)")
    p.add_argument("--no-grafana", dest="grafana", action="store_false", help="do not start grafana-server")
    p.add_argument("--scheduler", choices=("slurm", "kubernetes"), default="slurm",
                   help="how the simulated job holds its GPUs: Slurm's mapping files (default), or a JobSet's pods "
                        f"(kubelet PodResources sockets and an API server; job id {KUBE_JOB_ID} unless the "
                        "scenario names one)")
    p.add_argument("--history-days", type=float, default=30.0,
                   help="days of history backfilled before the live run, every 5 minutes: jobs, faults, "
                        "checkpoints and rack power for the report and the dashboards (default 30; 0: none)")


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    if args.speed <= 0:
        raise ValueError("--speed must be positive")
    if args.nodes is not None and args.nodes < 1:
        raise ValueError("--nodes must be at least 1")
    if not 0 <= args.history_days <= 366:      # NaN fails too
        raise ValueError("--history-days must be 0..366")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lockstep-demo-"))
    ports = {dest: getattr(args, dest) for _, dest, _, _ in PORTS}
    return DemoConfig(args.scenario, workdir.resolve(), args.speed, args.duration, args.nodes, ports,
                      args.base_port, args.grafana, args.scheduler, args.history_days)


def check_ports(config: DemoConfig, node_count: int) -> list[str]:
    """A message per configured port already taken (nothing has started yet)."""
    problems = []
    for flag, dest, _, what in PORTS:
        port = config.ports[dest]
        if port and (dest != "grafana_port" or config.grafana) and port_in_use(port):
            problems.append(f"port {port} for the {what} is already in use: pass {flag}=N (or 0 for any free port)")
    if config.base_port:
        busy = [p for p in range(config.base_port, config.base_port + node_count) if port_in_use(p)]
        if busy:
            problems.append(f"node exporter ports {config.base_port}-{config.base_port + node_count - 1} overlap "
                            f"ports in use ({', '.join(map(str, busy))}): pass --base-port=N (or 0)")
    return problems


def resolve(port: int) -> int:
    return port or free_port()
