"""`lockstep dashboards build --out DIR`: write the Grafana dashboards as JSON files.

The committed copies live in deploy/grafana/dashboards/ (Grafana's file provisioning reads them);
regenerate them with `lockstep dashboards build --out deploy/grafana/dashboards` after a change.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("dashboards", help="generate Grafana dashboards (grafanalib)",
                              description="generate Grafana dashboards (grafanalib)")
    sub = p.add_subparsers(dest="dashboards_command", metavar="COMMAND")
    build = sub.add_parser("build", help="write every dashboard as JSON into a directory",
                           description="write every dashboard as JSON into a directory")
    build.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory (created if missing)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "dashboards_command", None) != "build":
        print("usage: lockstep dashboards build --out DIR", file=sys.stderr)
        return 2
    from lockstep.dashboards.build import write_all

    try:
        written = write_all(args.out)
    except OSError as exc:
        print(f"lockstep dashboards: cannot write {args.out}: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0
