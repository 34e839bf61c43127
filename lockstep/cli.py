"""Entry point of the ``lockstep`` command: dispatches to the subcommand's own package."""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import Sequence

from exporters.version import VERSION

# (module providing add_parser(subparsers, argv)); the order is the order in --help.
SUBCOMMANDS = (
    "exporters.cli",           # lockstep exporter
    "exporters.power.cli",     # lockstep power-exporter
    "analytics.cli",           # lockstep analytics serve|evaluate|steptimes
    "simulator.cli",           # lockstep sim run|series
    "dashboards.cli",          # lockstep dashboards build
    "alerts.cli",              # lockstep alerts build|quarantine-receiver
    "analytics.report.cli",    # lockstep report monthly
    "lockstep.demo",           # lockstep demo
)
_UNKNOWN_COLLECTOR = re.compile(r"--(?:no-)?collector\.([A-Za-z0-9_.-]+)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        if "unrecognized arguments" in message and (names := _UNKNOWN_COLLECTOR.findall(message)):
            from exporters import registry
            known = ", ".join(registry.load())
            message = f"unknown collector {names[0]!r} (known collectors: {known})"
        super().error(message)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="lockstep", description=(
        "Telemetry and diagnosis for GPU training clusters: node and power exporters, straggler/stall "
        "analytics, dashboards, alerts, a simulated cluster and a one-command demo."))
    parser.add_argument("--version", action="version", version=f"lockstep {VERSION}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(subparsers, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
