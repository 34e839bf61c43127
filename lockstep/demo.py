"""`lockstep demo` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("demo", help="run the whole stack on a simulated cluster on this machine", description="run the whole stack on a simulated cluster on this machine")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep demo: not implemented yet", file=sys.stderr)
    return 1
