"""``lockstep report monthly --prometheus-url URL --month YYYY-MM --out DIR``."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from lockstep.analytics.prom.auth import add_flags as add_prometheus_flags
from lockstep.analytics.prom.errors import PrometheusError

if TYPE_CHECKING:   # imported where used: `lockstep report --help` loads no pandas
    from lockstep.analytics.report.monthly import ReportConfig
from lockstep.analytics.prom.answersize import REPORT_DEFAULT
from lockstep.analytics.prom.answersize import add_flag as add_max_answer_flag


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("report", help="monthly capacity and power review",
                              description="monthly capacity and power review")
    sub = p.add_subparsers(dest="report_command", metavar="REPORT", required=True)
    m = sub.add_parser("monthly", help="GPU-hours, energy, recurring faults and checkpoint cost for one month",
                       description="Query Prometheus (or Thanos, Mimir, VictoriaMetrics) for one month, or the "
                                   "month to date, and write an HTML report with plots and a CSV of every table "
                                   "(coverage.csv: how much of the month the data covers).")
    add_prometheus_flags(m)
    add_max_answer_flag(m, REPORT_DEFAULT)
    m.add_argument("--month", required=True, help="YYYY-MM (UTC)")
    m.add_argument("--out", required=True, type=Path, help="output directory")
    m.add_argument("--step", type=float, default=3600.0,
                   help="seconds per point for month totals, at most: finer where the data covers only part of "
                        "the month, never finer than its samples (default 3600)")
    m.add_argument("--fine-step", type=float, default=30.0,
                   help="seconds per point to resolve checkpoint stalls and peaks, or the data's sample interval "
                        "if coarser (default 30)")
    m.add_argument("--cluster", default="default", help="name for series without a cluster label")
    m.add_argument("--teams", type=Path, help="CSV job_id,team mapping jobs to teams")
    m.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 2 for a bad flag or an unusable file named by one, 1 when Prometheus cannot be read (unreachable,
    refusing, or answering what is not a Prometheus answer) or the report cannot be written: one line on
    stderr either way, secrets redacted."""
    from lockstep.analytics.prom.session import Credentials
    from lockstep.analytics.report.monthly import write_report
    try:
        config = config_from_args(args)
    except (ValueError, OSError) as exc:
        return _fail(str(exc), 2)
    try:
        path = write_report(config)
    except (PrometheusError, OSError) as exc:
        return _fail(Credentials(config.auth).redact(str(exc)), 1)
    print(path)
    return 0


def config_from_args(args: argparse.Namespace) -> ReportConfig:
    from lockstep.analytics.prom.auth import auth_from_args
    from lockstep.analytics.prom.session import check_credentials
    from lockstep.analytics.report.monthly import ReportConfig, load_teams, month_range
    from lockstep.analytics.report.queries import Steps

    if not (0 < args.step < math.inf and 0 < args.fine_step < math.inf):   # NaN fails both
        raise ValueError("--step and --fine-step must be positive, finite seconds")
    month_range(args.month)
    config = ReportConfig(args.prometheus_url, args.month, args.out, Steps(args.step, args.fine_step), args.cluster,
                          load_teams(args.teams) if args.teams else None, auth_from_args(args), args.max_answer_bytes)
    check_credentials(config.auth)
    return config


def _fail(message: str, code: int) -> int:
    print(f"lockstep report: error: {' '.join(message.split())}", file=sys.stderr)
    return code
