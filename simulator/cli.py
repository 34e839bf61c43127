"""`lockstep sim` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("sim", help="simulated GPU training cluster with fault injection: run, series", description="simulated GPU training cluster with fault injection: run, series")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep sim: not implemented yet", file=sys.stderr)
    return 1
