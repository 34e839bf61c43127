"""`lockstep dashboards` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("dashboards", help="generate Grafana dashboards (grafanalib)", description="generate Grafana dashboards (grafanalib)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep dashboards: not implemented yet", file=sys.stderr)
    return 1
