"""`lockstep power-exporter` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("power-exporter", help="poll Redfish/IPMI BMCs, PDUs and CDUs and serve rack power and cooling metrics", description="poll Redfish/IPMI BMCs, PDUs and CDUs and serve rack power and cooling metrics")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("lockstep power-exporter: not implemented yet", file=sys.stderr)
    return 1
