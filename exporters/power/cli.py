"""``lockstep power-exporter --config FILE``: polls Redfish/IPMI BMCs, PDUs and CDUs and serves
rack power and cooling metrics on ``:9841``. Credentials come from the config's files or
environment variables, never from this command line."""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Sequence

from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.listen import parse_listen_address
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv, setup_from_args
from lockstep.exporters.toolkit.openfiles import raise_open_files_limit
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags

log = logging.getLogger("lockstep.power")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "power-exporter", help="poll Redfish/IPMI BMCs, PDUs and CDUs and serve rack power and cooling metrics",
        description="Poll Redfish/IPMI BMCs, PDUs and CDUs concurrently and serve rack power and cooling "
                    "metrics: /metrics (background polls) and /probe?target=NAME.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--config", dest="config", required=True, metavar="FILE",
                   help="YAML config: interval_s, timeout_s, targets (see docs/architecture.md)")
    p.add_argument("--config.check", dest="config.check", action="store_true",
                   help="validate the config (and read its credential files) and exit")
    add_web_flags(p, ":9841")
    p.add_argument("--no-background", dest="background", action="store_false",
                   help="do not poll in the background: serve /probe only (Prometheus drives polling)")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.power.app import AppOptions, create_app
    from lockstep.exporters.power.config import load_config
    from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
    from lockstep.exporters.toolkit.version import VERSION
    from lockstep.exporters.toolkit.web import serve
    from lockstep.exporters.toolkit.webconfig import load_web_config

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

