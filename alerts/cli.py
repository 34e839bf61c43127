"""`lockstep alerts build|quarantine-receiver`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from lockstep.exporters.toolkit.configfile import ConfigError


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("alerts", help="generate Prometheus rules and Alertmanager config; quarantine receiver",
                              description="generate Prometheus rules and Alertmanager config; quarantine receiver")
    sub = p.add_subparsers(dest="alerts_command", metavar="SUBCOMMAND", required=True)
    build = sub.add_parser("build", help="write lockstep-rules.yml and alertmanager.yml",
                           description="write lockstep-rules.yml and alertmanager.yml")
    build.add_argument("--out", required=True, type=Path, help="output directory")
    build.add_argument("--config", type=Path, default=None,
                       help="YAML overriding selectors, thresholds, for: durations, receivers (see alerts/config.py)")
    build.set_defaults(func=run)
    from lockstep.alerts import quarantine_cli
    quarantine_cli.add_parser(sub)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.alerts_command == "quarantine-receiver":
        from lockstep.alerts import quarantine_cli
        return quarantine_cli.run(args)
    from lockstep.alerts import build, config
    try:
        cfg = config.load(args.config)
    except ConfigError as exc:
        print(f"lockstep alerts: {exc}", file=sys.stderr)
        return 2
    for path in build.write(cfg, args.out):
        print(path)
    return 0
