"""``lockstep storage-exporter --config FILE``: polls cluster-wide storage systems (MinIO, Ceph RGW, VAST, WEKA) over
their own interfaces and serves per-bucket, file-system or view bytes, operations, errors and capacity on ``:9847``.
Credentials come from the config's files, never from this command line."""
from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Sequence

from lockstep.exporters.toolkit import targetcli
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.storage")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "storage-exporter", help="poll cluster-wide storage systems (MinIO, Ceph RGW, VAST, WEKA); serve I/O and capacity",
        description="Poll cluster-wide storage systems concurrently, each within its own timeout, and serve "
                    "their bytes, operations, errors and capacity per bucket, file system or view on /metrics.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    targetcli.add_flags(p, ":9847", "YAML config: interval_s, timeout_s, max_concurrency, targets (see docs/architecture.md)",
                        "validate the config (and read its credential files) and exit")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.storagesys.app import create_app
    from lockstep.exporters.storagesys.config import load_config
    from lockstep.exporters.toolkit.version import VERSION
    from lockstep.exporters.toolkit.web import serve

    serving = targetcli.load(args, "storage-exporter", load_config)
    if isinstance(serving, int):
        return serving
    config = serving.config
    log.info("starting lockstep storage exporter", extra=kv(
        version=VERSION, targets=len(config.targets), interval_s=config.interval_s, timeout_s=config.timeout_s,
        max_concurrency=config.max_concurrency))
    asyncio.run(serve(create_app(config, serving.web_config), serving.listen, serving.web_config, timeouts=serving.timeouts))
    return 0
