"""``lockstep power-exporter --config FILE``: polls Redfish/IPMI BMCs, PDUs and CDUs and serves
rack power and cooling metrics on ``:9841``. Credentials come from the config's files or
environment variables, never from this command line."""
from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Sequence

from lockstep.exporters.toolkit import targetcli
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.openfiles import raise_open_files_limit

log = logging.getLogger("lockstep.power")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "power-exporter", help="poll Redfish/IPMI BMCs, PDUs and CDUs and serve rack power and cooling metrics",
        description="Poll Redfish/IPMI BMCs, PDUs and CDUs concurrently and serve rack power and cooling "
                    "metrics: /metrics (background polls) and /probe?target=NAME.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    targetcli.add_flags(p, ":9841", "YAML config: interval_s, timeout_s, targets (see docs/architecture.md)",
                        "validate the config (and read its credential files) and exit")
    p.add_argument("--no-background", dest="background", action="store_false",
                   help="do not poll in the background: serve /probe only (Prometheus drives polling)")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.power.app import AppOptions, create_app
    from lockstep.exporters.power.config import load_config
    from lockstep.exporters.toolkit.version import VERSION
    from lockstep.exporters.toolkit.web import serve

    serving = targetcli.load(args, "power-exporter", load_config)
    if isinstance(serving, int):
        return serving
    config = serving.config
    open_files = raise_open_files_limit()
    log.info("starting lockstep power exporter", extra=kv(
        version=VERSION, targets=len(config.targets), interval_s=config.interval_s, timeout_s=config.timeout_s,
        max_concurrency=config.max_concurrency, open_files_limit=open_files))
    app = create_app(config, AppOptions(background=args.background, web_config=serving.web_config))
    asyncio.run(serve(app, serving.listen, serving.web_config, timeouts=serving.timeouts))
    return 0

