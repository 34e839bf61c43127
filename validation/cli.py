"""``lockstep validate ingest|run|report``: cluster validation results into the store the node agent serves.

Exit status: 0 the run passed (or warned), 1 it failed, timed out or errored (a health gate drains on
it), 2 bad arguments or, for ``ingest``, output that does not parse (nothing is stored then).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from lockstep.exporters.catalog.enums import KINDS
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.validation.store import DEFAULT_DIR


class _ToolCommandParser(argparse.ArgumentParser):
    """Takes everything after the first ``--`` as the tool's command line (``run``): argparse alone would
    either let the tool's own flags through as ours or, with REMAINDER, swallow our flags after KIND."""

    takes_command = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        args = list(sys.argv[1:] if args is None else args)
        tail: list[str] = []
        if self.takes_command and "--" in args:
            split = args.index("--")
            args, tail = args[:split], args[split + 1:]
        namespace, extra = super().parse_known_args(args, namespace)
        if self.takes_command:
            namespace.command = tail
        return namespace, extra


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir", type=Path, default=DEFAULT_DIR,
                   help="results directory the node agent reads (--validation.results-dir); may be shared")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--test", help="test name (default: what the output or command names, e.g. "
                                  "all_reduce_perf, ib_write_bw/mlx5_0, diag-r3; else the kind)")
    p.add_argument("--node", action="append", default=[], metavar="NAMES",
                   help="node(s) the run covered, repeatable, Slurm host lists allowed (node[01-04]); default: "
                        "the hosts the output names (nccl-tests ranks), else this host")
    p.add_argument("--expect-gpus", type=int, metavar="N",
                   help="fail unless the run reports on N GPUs (dcgm-diag, gpu-burn): a lost GPU is not tested")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("validate", help="cluster validation results (nccl-tests, perftest, DCGM diag, fio, "
                              "gpu-burn) as metrics: ingest, run, report",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="validate_command", metavar="SUBCOMMAND", required=True,
                           parser_class=_ToolCommandParser)
    ingest = sub.add_parser("ingest", help="parse a tool's saved output and store the result",
                            formatter_class=DefaultsHelpFormatter)
    ingest.add_argument("file", type=Path, help="the tool's output (stdout; fio and dcgmi diag: their JSON)")
    ingest.add_argument("--kind", required=True, choices=KINDS)
    ingest.add_argument("--started", type=float, help="Unix time the run started (default: the file's mtime)")
    ingest.add_argument("--no-store", action="store_true", help="parse and print only")
    _target(ingest)
    _common(ingest)
    run = sub.add_parser("run", help="run a tool with a hard timeout and store its result (or `timeout`)",
                         formatter_class=DefaultsHelpFormatter, usage="%(prog)s KIND --timeout SECONDS [options] "
                         "-- TOOL [ARGS...]",
                         description="Run TOOL ARGS (local, or through srun/mpirun as given) in its own process "
                                     "group; at --timeout the whole group gets SIGTERM, SIGKILL 5 s later, and the "
                                     "result is `timeout`.")
    run.takes_command = True
    run.add_argument("kind", choices=KINDS)
    run.add_argument("--timeout", type=float, required=True, help="seconds before the tool's process group is killed")
    _target(run)
    _common(run)
    report = sub.add_parser("report", help="latest result of each test beside its baselines",
                            formatter_class=DefaultsHelpFormatter)
    report.add_argument("--node", action="append", default=[], metavar="NAMES",
                        help="nodes to report (default: this host; --all: every node in the directory)")
    report.add_argument("--all", action="store_true", help="every node in the results directory")
    report.add_argument("--fraction", type=float, default=0.2,
                        help="mark LOW a figure this fraction below a baseline")
    _common(report)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from lockstep.validation import commands
    from lockstep.validation.store import StoreError
    try:
        return {"ingest": commands.ingest, "run": commands.run, "report": commands.report}[args.validate_command](args)
    except (ValueError, OSError, StoreError) as exc:
        print(f"lockstep validate {args.validate_command}: error: {exc}", file=sys.stderr)
        return 2
