"""``lockstep sim run|series``: the simulated cluster, live or as a series frame with ground truth."""
from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path
from typing import Sequence

from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.exporters.toolkit.listen import parse_listen_address


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> argparse._SubParsersAction:
    """The ``sim`` command and its subcommands; returns them for more (``lockstep sim backfill``)."""
    p = subparsers.add_parser("sim", help="simulated GPU training cluster with fault injection: run, series, backfill",
                              description="simulated GPU training cluster with fault injection: run, series, backfill")
    sub = p.add_subparsers(dest="sim_command", metavar="{run,series,backfill}", required=True)
    r = sub.add_parser("run", help="live cluster: per-node source trees under --root and a Redfish service")
    r.add_argument("scenario", type=Path, help="scenario YAML (simulator/scenarios/*.yaml)")
    r.add_argument("--root", type=Path, required=True, help="directory for DIR/<node>/{sys,proc,ethtool,gpus.json}")
    r.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second (default 1)")
    r.add_argument("--redfish-listen", default="127.0.0.1:0",
                   help="HOST:PORT of the Redfish service (default 127.0.0.1:0, an ephemeral port)")
    r.add_argument("--duration", type=float, default=None,
                   help="simulated seconds to run (default: the scenario's duration_s; 0 runs until stopped)")
    r.add_argument("--scheduler", choices=("slurm", "kubernetes"), default="slurm",
                   help="how the job holds its GPUs: the Slurm prolog's mapping files (default), or pods of a "
                        "JobSet with a kubelet PodResources socket per node and an API server answering pod "
                        "list/watch (DIR/kubeconfig)")
    r.add_argument("--nccl-inspector", choices=("2.30", "2.29", "off"), default="2.30",
                   help="NCCL Inspector Prometheus files of the job's ranks under DIR/<node>/nccl-inspector/, as "
                        "that NCCL release writes them (default 2.30), or none")
    r.add_argument("--counters-from", type=Path, metavar="FILE",
                   help="start the hardware counters where another run left them (a counters document, "
                        "FORMATS.md), e.g. at the end of a backfilled history")
    s = sub.add_parser("series", help="the same model as a long-format Parquet frame plus FILE.truth.json")
    s.add_argument("scenario", type=Path)
    s.add_argument("--out", type=Path, required=True, help="FILE.parquet (truth goes to FILE.truth.json)")
    p.set_defaults(func=run)
    return sub


def run(args: argparse.Namespace) -> int:
    from lockstep.simulator.scenario import load_scenario
    try:
        scenario = load_scenario(args.scenario)
        if args.sim_command == "run":
            if not 0 < args.speed < math.inf:      # NaN fails every comparison: it would skip pacing
                raise ValueError(f"--speed must be a finite number > 0, got {args.speed:g}")
            if args.duration is not None and not 0 <= args.duration < math.inf:
                raise ValueError(f"--duration must be a finite number >= 0, got {args.duration:g}")
            listen = parse_listen_address(args.redfish_listen)
            start_counters = _counters(scenario, args.counters_from)
    except (ConfigError, ValueError) as exc:
        print(f"lockstep sim: {exc}", file=sys.stderr)
        return 2
    try:
        if args.sim_command == "series":
            from lockstep.simulator.series import write_series
            out, truth, rows = write_series(scenario, args.out)
            print(f"lockstep sim: wrote {rows} rows to {out} and ground truth to {truth}")
            return 0
        args.root.mkdir(parents=True, exist_ok=True)   # fail before the Redfish service starts
    except OSError as exc:
        print(f"lockstep sim: cannot write {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    from lockstep.simulator.live import run_live
    inspector = None if args.nccl_inspector == "off" else args.nccl_inspector
    return asyncio.run(run_live(scenario, args.root, args.speed, listen, args.duration, args.scheduler,
                                start_counters, inspector))


def _counters(scenario, path: Path | None) -> dict | None:
    """The counters document, checked against the scenario's cluster before anything starts."""
    if path is None:
        return None
    from lockstep.simulator import counters
    from lockstep.simulator.model import Model
    doc = counters.read(path)
    try:
        next(Model(scenario, counters=doc).states(1))   # a shape that does not fit the cluster fails here
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return doc
