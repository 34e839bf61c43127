"""`lockstep alerts` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("alerts", help="generate Prometheus rules and Alertmanager config; quarantine receiver", description="generate Prometheus rules and Alertmanager config; quarantine receiver")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep alerts: not implemented yet", file=sys.stderr)
    return 1
