"""``lockstep power-exporter --config FILE``: polls Redfish/IPMI BMCs, PDUs and CDUs and serves
rack power and cooling metrics on ``:9841``. Credentials come from the config's files or
environment variables, never from this command line."""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Sequence

from exporters.helpformat import DefaultsHelpFormatter
from exporters.configfile import ConfigError
from exporters.listen import parse_listen_address
from exporters.logs import add_flags as add_log_flags, kv, setup_from_args
from exporters.openfiles import raise_open_files_limit
from exporters.webconfig import add_flags as add_web_flags

log = logging.getLogger("lockstep.power")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "power-exporter", help="poll Redfish/IPMI BMCs, PDUs and CDUs and serve rack power and cooling metrics",
        description="Poll Redfish/IPMI BMCs, PDUs and CDUs concurrently and serve rack power and cooling "
                    "metrics: /metrics (background polls) and /probe?target=NAME.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--config", dest="config", required=True, metavar="FILE",
                   help="YAML config: interval_s, timeout_s, targets (see ARCHITECTURE.md)")
    p.add_argument("--config.check", dest="config.check", action="store_true",
                   help="validate the config (and read its credential files) and exit")
    add_web_flags(p, ":9841")
    p.add_argument("--no-background", dest="background", action="store_false",
                   help="do not poll in the background: serve /probe only (Prometheus drives polling)")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from exporters.conntimeouts import from_args as timeouts_from_args
    from exporters.power.app import AppOptions, create_app
    from exporters.power.config import load_config
    from exporters.web import serve
    from exporters.webconfig import load_web_config
    from exporters.version import VERSION

    setup_from_args(args)
    try:
        config = load_config(args.config)
        listen = parse_listen_address(getattr(args, "web.listen-address"))
        web_file = getattr(args, "web.config.file")
        web_config = load_web_config(web_file) if web_file else None
        timeouts = timeouts_from_args(args)
    except (ConfigError, ValueError) as exc:
        print(f"lockstep power-exporter: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "config.check"):
        print(f"{args.config}: ok, {len(config.targets)} targets")
        return 0
    open_files = raise_open_files_limit()
    log.info("starting lockstep power exporter", extra=kv(
        version=VERSION, targets=len(config.targets), interval_s=config.interval_s, timeout_s=config.timeout_s,
        max_concurrency=config.max_concurrency, open_files_limit=open_files))
    app = create_app(config, AppOptions(background=args.background, web_config=web_config))
    asyncio.run(serve(app, listen, web_config, timeouts=timeouts))
    return 0

