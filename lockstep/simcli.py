"""``lockstep sim``: the simulator's own subcommands (``run``, ``series``) and ``backfill``, which
needs promtool and the consumers' metric sets (``lockstep.simbackfill``)."""
from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.timeparse import parse_time


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    from lockstep.simulator import cli
    sub = cli.add_parser(subparsers, argv)
    b = sub.add_parser("backfill", formatter_class=DefaultsHelpFormatter,
                       help="the scenario's series over N days as Prometheus TSDB blocks (promtool)",
                       description="Simulate SCENARIO over --days and write its series as TSDB blocks into DIR "
                                   "(Prometheus' --storage.tsdb.path), streamed through promtool: memory stays "
                                   "bounded however long the range. After the scenario's duration_s its job runs "
                                   "on without faults.")
    b.add_argument("scenario", type=Path, help="scenario YAML (simulator/scenarios/*.yaml)")
    b.add_argument("--days", type=float, required=True, help="days of history (0.0208 = 30 minutes)")
    b.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="TSDB directory (Prometheus' --storage.tsdb.path)")
    b.add_argument("--step", type=float, help="seconds between samples (default: the scenario's sample_period_s)")
    when = b.add_mutually_exclusive_group()
    when.add_argument("--start", help="first sample: Unix seconds or RFC 3339 with its zone (default: the scenario's start)")
    when.add_argument("--end", help="last sample: 'now', Unix seconds or RFC 3339 with its zone; the range ends there")
    b.add_argument("--metrics", default="all",
                   help="all, or a comma list of sets (analytics: what the analytics service reads; report: the "
                        "monthly report; dashboards: the dashboards and the inputs of their recording rules) "
                        "and catalog metric names")
    b.add_argument("--samples-per-file", type=int, default=None, metavar="N",
                   help="samples per promtool run, which maps its whole input: bounds promtool's memory "
                        "(default 10,000,000, about 1.5 GB)")
    b.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="promtool runs at once, each on its own file (and with its own memory)")
    b.set_defaults(func=run_backfill)


def run_backfill(args: argparse.Namespace) -> int:
    from lockstep.backfill.sim import backfill_scenario, resolve_metrics
    from lockstep.exporters.toolkit.configfile import ConfigError
    from lockstep.simulator.scenario import load_scenario
    from lockstep.stack import MissingBinary
    try:
        scenario = load_scenario(args.scenario)
        if not 0 < args.days < math.inf or (args.step is not None and not 0 < args.step < math.inf):
            raise ValueError("--days and --step must be positive and finite")
        if args.samples_per_file is not None and args.samples_per_file < 1 or args.jobs < 1:
            raise ValueError("--samples-per-file and --jobs must be at least 1")
        step = args.step or scenario.sample_period_s
        start = parse_time(args.start, "--start") if args.start else None
        if args.end:
            start = parse_time(args.end, "--end") - (math.ceil(args.days * 86400.0 / step) - 1) * step
        metrics = resolve_metrics(args.metrics)
        written = backfill_scenario(scenario, args.out, args.days, args.step, start, metrics, args.samples_per_file,
                                    args.jobs)
    except (ConfigError, ValueError, MissingBinary, RuntimeError, OSError) as exc:
        print(f"lockstep sim backfill: {exc}", file=sys.stderr)
        return 2
    _report(args.out, written)
    return 0


def _report(out: Path, w) -> None:
    span = f"{_utc(w.start)} to {_utc(w.end)}"
    print(f"lockstep sim: wrote {w.samples:,} samples of {w.series:,} series ({span}) as TSDB blocks in {out} "
          f"({w.files} promtool run{'s' if w.files != 1 else ''})")
    print(f"  peak memory {w.rss_mb:.0f} MB here, {w.promtool_rss_mb:.0f} MB promtool; "
          f"CPU {w.cpu_s:.1f} s here, {w.promtool_cpu_s:.1f} s promtool")
    if w.skipped:
        print(f"  not simulated, left out: {', '.join(w.skipped)}")
    days = math.ceil((time.time() - w.start) / 86400.0) + 1
    print(f"  serve them: prometheus --storage.tsdb.path={out} --storage.tsdb.retention.time={max(days, 15)}d "
          f"(a shorter retention deletes older blocks at start)")


def _utc(seconds: float) -> str:
    return f"{datetime.fromtimestamp(seconds, timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
