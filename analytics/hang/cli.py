"""``lockstep analytics hang DIR``: the flags, and the exit codes: 0 no hang found in the dumps, 1 a hang
found (a collective not every rank joined, a mismatched call, ranks without a dump that others wait
for, or a collective every rank is stuck in), 2 nothing usable (no directory, no dump file, not one
readable dump, a bad flag or ranks file). Dumps that cannot be read while others can are reported as
such and their ranks counted as without a dump; they alone never make the exit code 2.
"""
from __future__ import annotations

import argparse
import json
import sys

from lockstep.exporters.toolkit.configfile import ConfigError

OK, HANG, UNUSABLE = 0, 1, 2


def add_flags(p: argparse.ArgumentParser) -> None:
    from lockstep.analytics.hang.dump import MAX_BYTES

    p.add_argument("dir", metavar="DIR", help="directory of per-rank Flight Recorder dumps (<prefix><rank>, pickle or "
                                              "JSON, as TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
                                              "name them)")
    p.add_argument("--json", action="store_true", help="print JSON (shape in docs/hang.md)")
    p.add_argument("--prefix", help="only files named <PREFIX><rank> (default: every file whose name ends in a rank)")
    p.add_argument("--ranks", metavar="FILE", help="CSV with columns rank,node,gpu: where each rank ran")
    p.add_argument("--nodes", metavar="LIST", help="the job's nodes in launch order, comma-separated or @FILE (one a "
                                                   "line, as scontrol show hostnames prints them); with "
                                                   "--gpus-per-node: rank r on node r // N, GPU r %% N")
    p.add_argument("--gpus-per-node", type=int, metavar="N", help="ranks per node, for --nodes")
    p.add_argument("--world-size", type=int, metavar="N", help="the job's number of ranks, so that ranks without "
                                                               "any file are counted as without a dump")
    p.add_argument("--max-bytes", type=int, default=MAX_BYTES, metavar="N", help="largest dump file read "
                                                                                 f"(default {MAX_BYTES})")


def run(args: argparse.Namespace) -> int:
    from lockstep.analytics.hang import dump, match, placement, report

    if (args.nodes is None) != (args.gpus_per_node is None):
        raise ValueError("--nodes and --gpus-per-node go together")
    if args.ranks and args.nodes:
        raise ValueError("give --ranks FILE or --nodes with --gpus-per-node, not both")
    if args.world_size is not None and args.world_size < 1:
        raise ValueError("--world-size must be at least 1")
    places = placement.from_csv(args.ranks) if args.ranks else \
        placement.from_nodes(placement.parse_nodes(args.nodes), args.gpus_per_node) if args.nodes else {}
    try:
        read = dump.read_dir(args.dir, args.prefix, args.max_bytes)
    except OSError as exc:
        raise ConfigError(args.dir, None, "", f"cannot list: {exc.strerror or exc}") from None
    if not read.dumps:
        why = "; ".join(f"{u.file}: {u.reason}" for u in read.unreadable) or \
            f"no file named <prefix><rank> in {args.dir}"
        print(f"lockstep analytics hang: error: no readable dump: {why}", file=sys.stderr)
        return UNUSABLE
    analysis = match.analyse(read.dumps, [u.rank for u in read.unreadable if u.rank is not None], args.world_size)
    if args.json:
        print(json.dumps(report.document(analysis, read, args.dir, places), indent=1))
    else:
        sys.stdout.write(report.text(analysis, read, places))
    return HANG if analysis.hang else OK
