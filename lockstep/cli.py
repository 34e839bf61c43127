"""Entry point of the ``lockstep`` command: dispatches to the subcommand's own package."""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import Sequence

from lockstep.exporters.toolkit.version import VERSION

# name -> (module providing add_parser(subparsers, argv), one-line help); the order is --help's.
# Only the module of the command being run is imported: the node agent must not pay for pandas.
SUBCOMMANDS = {
    "exporter": ("lockstep.exporters.cli", "run the node agent (GPU, fabric, storage collectors) serving /metrics"),
    "power-exporter": ("lockstep.exporters.power.cli", "poll Redfish/IPMI BMCs, PDUs and CDUs; serve rack power and cooling"),
    "fabric-exporter": ("lockstep.exporters.switches.cli", "sweep an InfiniBand subnet's switch and HCA ports: counters, "
                                                           "link partners, link health"),
    "switch-exporter": ("lockstep.exporters.gnmi.cli", "subscribe over gNMI to switches' PFC, ECN, queue and "
                                                       "PFC-watchdog counters; serve them"),
    "analytics": ("lockstep.analytics.cli", "straggler, stall and utilization-loss scoring: serve, evaluate, steptimes; "
                                            "hang localisation"),
    "sim": ("lockstep.simcli", "simulated GPU training cluster with fault injection: run, series, backfill"),
    "dashboards": ("lockstep.dashboards.cli", "generate the Grafana dashboards (grafanalib)"),
    "alerts": ("lockstep.alerts.cli", "generate Prometheus rules and Alertmanager config; quarantine receiver"),
    "validate": ("lockstep.validation.cli", "cluster validation results (nccl-tests, perftest, DCGM diag, fio, gpu-burn): "
                                   "ingest, run, report"),
    "report": ("lockstep.analytics.report.cli", "monthly capacity and power review"),
    "demo": ("lockstep.demo", "run the whole stack on a simulated cluster on this machine"),
}
_UNKNOWN_COLLECTOR = re.compile(r"--(?:no-)?collector\.([A-Za-z0-9_.-]+)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        if "unrecognized arguments" in message and (names := _UNKNOWN_COLLECTOR.findall(message)):
            from lockstep.exporters import registry
            known = ", ".join(registry.load())
            message = f"unknown collector {names[0]!r} (known collectors: {known})"
        super().error(message)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="lockstep", description=(
        "Telemetry and diagnosis for GPU training clusters: node and power exporters, straggler/stall "
        "analytics, dashboards, alerts, a simulated cluster and a one-command demo."))
    parser.add_argument("--version", action="version", version=f"lockstep {VERSION}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module, help) in SUBCOMMANDS.items():
        if name == chosen:
            importlib.import_module(module).add_parser(subparsers, argv)
        else:
            subparsers.add_parser(name, help=help)  # listed in --help; built for real only when chosen
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
