"""`lockstep report` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("report", help="monthly capacity and power review", description="monthly capacity and power review")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep report: not implemented yet", file=sys.stderr)
    return 1
