"""``lockstep analytics serve|evaluate|steptimes|hang``."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Sequence

from lockstep.analytics import malloc
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    from lockstep.analytics.prom.auth import add_flags as add_prometheus_flags
    from lockstep.analytics.service.config import add_serve_flags
    from lockstep.exporters.toolkit.logs import add_flags as add_log_flags

    p = subparsers.add_parser("analytics", help="straggler, stall and utilization-loss scoring: serve, evaluate, steptimes"
                                                "; hang localisation",
                              description="straggler, stall and utilization-loss scoring: serve, evaluate, steptimes; "
                                          "hang localisation from Flight Recorder dumps: hang")
    sub = p.add_subparsers(dest="analytics_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser("serve", help="score jobs from Prometheus; serve /metrics and /api/v1/jobs",
                           formatter_class=DefaultsHelpFormatter)
    add_serve_flags(serve)
    add_log_flags(serve)
    ev = sub.add_parser("evaluate", help="run the scorers on a simulated scenario, or on a past window read from "
                                         "Prometheus (post-mortem), and print the detection report")
    ev.add_argument("scenario", nargs="?", help="scenario YAML (simulator/scenarios/...)")
    ev.add_argument("--all", metavar="DIR", help="every scenario in DIR against its truth: recall, precision, "
                                                 "latency and cause accuracy per fault kind")
    ev.add_argument("--json", action="store_true", help="print JSON")
    ev.add_argument("--truth", action="store_true", help="add the comparison with the scenario's ground truth")
    ev.add_argument("--models", action="store_true", help="with --all: also weigh the scikit-learn alternatives "
                                                          "(robust covariance, Gaussian mixture) against the rules")
    add_prometheus_flags(ev, required=False)   # a post-mortem (instead of a scenario): its store and how to reach it
    pm = ev.add_argument_group("post-mortem (instead of a scenario)")
    pm.add_argument("--from", dest="start", metavar="T", help="window start: 'now', Unix seconds or RFC 3339 with its zone")
    pm.add_argument("--to", dest="end", metavar="T", help="window end: 'now', Unix seconds or RFC 3339 with its zone")
    pm.add_argument("--job", help="only this job id")
    pm.add_argument("--step", type=float, default=5.0, help="seconds between samples (the scrape interval)")
    pm.add_argument("--timeout", type=float, default=120.0, help="seconds per Prometheus request")
    st = sub.add_parser("steptimes", help="per-rank step times (worker,step,seconds CSV) → stragglers and imbalance")
    st.add_argument("file", nargs="?", help="CSV with header worker,step,seconds (or the Alibaba PAI ,worker,gpu,time,"
                                            "batch_time_norm)")
    st.add_argument("--telemetry", metavar="FILE", help="CSV of the same workers' hardware (worker,step and any of "
                                                        "clock_ratio,temperature_celsius,reasons,pcie_degraded,"
                                                        "hardware_xid): each finding's cause is added")
    st.add_argument("--json", action="store_true", help="print JSON")
    live = st.add_argument_group("from Prometheus (instead of FILE): the step feed's counters of one job")
    live.add_argument("--prometheus-url", help="Prometheus (or Thanos, Mimir, VictoriaMetrics) base URL")
    live.add_argument("--job", help="the job id")
    live.add_argument("--from", dest="start", metavar="T", help="window start: 'now', Unix seconds or RFC 3339 with its "
                                                                "zone")
    live.add_argument("--to", dest="end", metavar="T", help="window end (default now)")
    live.add_argument("--timeout", type=float, default=120.0, help="seconds per Prometheus request")
    fl = sub.add_parser("evaluate-fleet", help="peer-relative GPU health on simulated fleets: planted slow, hot and "
                                               "downtrained GPUs found, false verdicts per 1,000 GPU-days; exit 1 if "
                                               "a planted GPU is missed or a healthy one judged degraded")
    fl.add_argument("scenarios", nargs="+", help="fleet scenario files (simulator/scenarios/fleet/)")
    fl.add_argument("--models", action="store_true", help="also weigh the scikit-learn detectors against the rule")
    fl.add_argument("--json", action="store_true", help="print JSON")
    from lockstep.analytics.hang.cli import add_flags as add_hang_flags
    add_hang_flags(sub.add_parser("hang", help="PyTorch Flight Recorder dumps of a hung job (one per rank) → the first "
                                               "collective not every rank joined, who did not (node, GPU), mismatched "
                                               "calls; exit 0 none found, 1 hang found, 2 no readable dump"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    malloc.tune()
    try:
        return {"serve": _serve, "evaluate": _evaluate, "steptimes": _steptimes,
                "hang": _hang, "evaluate-fleet": _evaluate_fleet}[args.analytics_command](args)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        print(f"lockstep analytics {args.analytics_command}: error: {exc}", file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from lockstep.analytics.prom.session import check_credentials
    from lockstep.analytics.service.app import create_app
    from lockstep.analytics.service.config import config_from_args
    from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
    from lockstep.exporters.toolkit.logs import setup_from_args
    from lockstep.exporters.toolkit.web import serve

    setup_from_args(args)
    config = config_from_args(args)
    timeouts = timeouts_from_args(args)
    check_credentials(config.prometheus_auth)
    for line in config.advice():
        logging.getLogger("lockstep.analytics").warning(line)
    asyncio.run(serve(create_app(config), config.listen, config.web_config, timeouts=timeouts))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from lockstep.analytics.evaluation import harness, truthcheck
    from lockstep.analytics.evaluation.evaluate import evaluate, format_text

    if sum(map(bool, (args.all, args.scenario, args.prometheus_url))) != 1:
        raise ValueError("give one of SCENARIO.yaml, --all DIR, or --prometheus-url URL --from T --to T")
    if args.prometheus_url:
        return _post_mortem(args)
    if args.all:
        rows = harness.run_all(args.all, models=args.models)
        if not rows:
            raise ValueError(f"--all {args.all}: no *.yaml scenarios there")
        summary = harness.summarize(rows)
        if args.json:
            print(json.dumps({"summary": summary, "scenarios": [
                {k: r[k] for k in ("scenario", "file", "check")} for r in rows]}, indent=1))
        else:
            print(harness.format_summary(summary, rows))
        return 0
    run_, results, rep = evaluate(args.scenario)
    if args.truth:
        rep = {**rep, "truth_check": truthcheck.check(run_.truth, results, run_.start, run_.period)}
    print(json.dumps(rep, indent=1) if args.json else format_text(rep))
    return 0


def _post_mortem(args: argparse.Namespace) -> int:
    import asyncio

    from lockstep.analytics.evaluation.postmortem import PostMortem, format_text, post_mortem
    from lockstep.analytics.prom.auth import auth_from_args
    from lockstep.analytics.prom.errors import PrometheusError
    from lockstep.exporters.toolkit.timeparse import parse_time

    if args.start is None or args.end is None:
        raise ValueError("--prometheus-url needs --from T and --to T")
    pm = PostMortem(args.prometheus_url, parse_time(args.start, "--from"), parse_time(args.end, "--to"),
                    step_s=args.step, job_id=args.job, timeout_s=args.timeout, auth=auth_from_args(args))
    try:
        rep = asyncio.run(post_mortem(pm))
    except PrometheusError as exc:
        print(f"lockstep analytics evaluate: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(rep, indent=1) if args.json else format_text(rep))
    return 1 if rep.get("errors") else 0


def _steps_from_prometheus(args: argparse.Namespace):
    import asyncio

    import aiohttp

    from lockstep.analytics.prom import ranksteps
    from lockstep.analytics.prom.errors import PrometheusError
    from lockstep.exporters.toolkit.timeparse import parse_time

    if not args.job or args.start is None:
        raise ValueError("--prometheus-url needs --job ID and --from T")
    start, end = parse_time(args.start, "--from"), parse_time(args.end or "now", "--to")

    async def read():
        async with aiohttp.ClientSession() as session:
            return await ranksteps.read(session, args.prometheus_url, args.job, start, end, args.timeout)
    try:
        return asyncio.run(read())
    except PrometheusError as exc:     # unreachable, refusing, or a malformed answer: said in one line
        raise ValueError(" ".join(str(exc).split())) from None


def _steptimes(args: argparse.Namespace) -> int:
    from lockstep.analytics.scoring.steptimes import parse_csv, result

    telemetry = None
    if args.telemetry:
        from lockstep.analytics.scoring.stepcause import parse_telemetry
        telemetry = parse_telemetry(args.telemetry)
    if bool(args.file) == bool(args.prometheus_url):
        raise ValueError("give FILE.csv, or --prometheus-url URL --job ID --from T")
    found = result(parse_csv(args.file) if args.file else _steps_from_prometheus(args), telemetry)
    if args.json:
        print(json.dumps(found))
        return 0
    for s in found["stragglers"] or [{"worker": None}]:
        why = f"; {s['cause']}" + (" since the start" if s.get("since_start") else "") if s.get("cause") else ""
        print("no stragglers" if s["worker"] is None else
              f"worker {s['worker']}: first flagged at step {s['first_flagged_step']}, score {s['score']:.2f}{why}")
    for imb in found["imbalance"] or [{"ranks": []}]:
        if not imb["ranks"]:
            print("no imbalance")
            continue
        ranks = ", ".join(f"{r['worker']} {r['ratio']:.2f}x" for r in imb["ranks"])
        why = f"; {imb['cause']}" if imb.get("cause") else ""
        print(f"imbalance since the start (ratio to the median): {ranks}; "
              f"{100 * imb['lost_share']:.1f}% of the workers' time spent waiting for it{why}")
    return 0


def _evaluate_fleet(args: argparse.Namespace) -> int:
    from lockstep.analytics.evaluation.fleet import evaluate_fleet, format_fleet, ok

    reports = [evaluate_fleet(path, models=args.models) for path in args.scenarios]
    print(json.dumps(reports) if args.json else "\n".join(format_fleet(r) for r in reports))
    return 0 if all(ok(r["rule"]) for r in reports) else 1


def _hang(args: argparse.Namespace) -> int:
    from lockstep.analytics.hang.cli import run as run_hang

    return run_hang(args)
