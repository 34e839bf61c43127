"""``lockstep switch-exporter --config FILE``: subscribes over gNMI to switches' PFC, ECN, queue and PFC-watchdog
counters and serves them on ``:9846``. Credentials and TLS material come from the config's files, never
from this command line."""
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
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags

log = logging.getLogger("lockstep.switch")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "switch-exporter", help="subscribe over gNMI to switches' PFC, ECN, queue and PFC-watchdog counters",
        description="Subscribe over gNMI (SONiC or NVIDIA Cumulus path sets) to per-port, per-priority PFC, ECN, "
                    "queue and PFC-watchdog counters of Ethernet switches and serve them on /metrics.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--config", dest="config", required=True, metavar="FILE",
                   help="YAML config: sample_interval_s, reconnect_max_s, targets (see docs/architecture.md)")
    p.add_argument("--config.check", dest="config.check", action="store_true",
                   help="validate the config (and read its credential and TLS files) and exit")
    add_web_flags(p, ":9846")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.gnmi.app import create_app
    from lockstep.exporters.gnmi.config import load_config
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
        print(f"lockstep switch-exporter: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "config.check"):
        print(f"{args.config}: ok, {len(config.targets)} targets")
        return 0
    log.info("starting lockstep switch exporter", extra=kv(version=VERSION, targets=len(config.targets)))
    asyncio.run(serve(create_app(config, web_config), listen, web_config, timeouts=timeouts))
    return 0
