"""``lockstep switch-exporter --config FILE``: subscribes over gNMI to switches' PFC, ECN, queue and PFC-watchdog
counters and serves them on ``:9846``. Credentials and TLS material come from the config's files, never
from this command line."""
from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Sequence

from lockstep.exporters.toolkit import targetcli
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.switch")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "switch-exporter", help="subscribe over gNMI to switches' PFC, ECN, queue and PFC-watchdog counters",
        description="Subscribe over gNMI (SONiC or NVIDIA Cumulus path sets) to per-port, per-priority PFC, ECN, "
                    "queue and PFC-watchdog counters of Ethernet switches and serve them on /metrics.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    targetcli.add_flags(p, ":9846", "YAML config: sample_interval_s, reconnect_max_s, targets (see docs/architecture.md)",
                        "validate the config (and read its credential and TLS files) and exit")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.gnmi.app import create_app
    from lockstep.exporters.gnmi.config import load_config
    from lockstep.exporters.toolkit.version import VERSION
    from lockstep.exporters.toolkit.web import serve

    serving = targetcli.load(args, "switch-exporter", load_config)
    if isinstance(serving, int):
        return serving
    config = serving.config
    log.info("starting lockstep switch exporter", extra=kv(version=VERSION, targets=len(config.targets)))
    asyncio.run(serve(create_app(config, serving.web_config), serving.listen, serving.web_config, timeouts=serving.timeouts))
    return 0
