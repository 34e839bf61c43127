"""`lockstep analytics` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("analytics", help="straggler, stall and utilization-loss scoring: serve, evaluate, steptimes", description="straggler, stall and utilization-loss scoring: serve, evaluate, steptimes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep analytics: not implemented yet", file=sys.stderr)
    return 1
