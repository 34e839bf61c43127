"""``lockstep fabric-exporter``: sweeps an InfiniBand subnet with ibnetdiscover and perfquery in the
background and serves every switch and HCA port, its link partner and its health on ``:9843``."""
from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import sys
from typing import Sequence

from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv, setup_from_args
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags

log = logging.getLogger("lockstep.fabric")


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser(
        "fabric-exporter", help="sweep an InfiniBand subnet's switch and HCA ports; serve counters, partners, link health",
        description="Sweep an InfiniBand subnet in the background (ibnetdiscover -p, then perfquery -x per switch and "
                    "HCA) and serve the last complete sweep on /metrics. Run one per subnet, on a host with an HCA in it.",
        allow_abbrev=False, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--ibnetdiscover.command", dest="ibnetdiscover", default="ibnetdiscover",
                   help="ibnetdiscover command line, split like a shell would (add -C/-P to pick the HCA port)")
    p.add_argument("--perfquery.command", dest="perfquery", default="perfquery",
                   help="perfquery command line, split like a shell would")
    p.add_argument("--sweep.interval", dest="interval", type=float, default=60.0, help="seconds between sweep starts")
    p.add_argument("--sweep.discover-timeout", dest="discover_timeout", type=float, default=60.0,
                   help="seconds ibnetdiscover may take")
    p.add_argument("--sweep.node-timeout", dest="node_timeout", type=float, default=5.0,
                   help="seconds one switch's or HCA's perfquery may take")
    p.add_argument("--sweep.workers", dest="workers", type=int, default=8, help="perfquery runs at once")
    p.add_argument("--sweep.hcas", dest="sweep_hcas", default=True, action=argparse.BooleanOptionalAction,
                   help="perfquery every HCA too; --no-sweep.hcas reads switches only (each host link at its leaf's "
                        "end, the HCA's side coming from the node agents): one perfquery per switch, not per HCA")
    p.add_argument("--link.expected-width", dest="expected_width", type=int, default=None,
                   help="lanes every link should run at (4); with --link.expected-speed, narrower links are degraded")
    p.add_argument("--link.expected-speed", dest="expected_speed", default=None,
                   help="speed every link should run at (EDR, HDR, NDR, XDR)")
    add_web_flags(p, ":9843")
    add_log_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.switches.app import AppOptions, create_app
    from lockstep.exporters.switches.config import FabricConfig
    from lockstep.exporters.toolkit.configfile import ConfigError
    from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
    from lockstep.exporters.toolkit.listen import parse_listen_address
    from lockstep.exporters.toolkit.version import VERSION
    from lockstep.exporters.toolkit.web import serve
    from lockstep.exporters.toolkit.webconfig import load_web_config

    setup_from_args(args)
    try:
        config = FabricConfig(tuple(shlex.split(args.ibnetdiscover)), tuple(shlex.split(args.perfquery)), args.interval,
                              args.discover_timeout, args.node_timeout, args.workers, args.expected_width,
                              args.expected_speed.upper() if args.expected_speed else None, args.sweep_hcas)
        listen = parse_listen_address(getattr(args, "web.listen-address"))
        web_file = getattr(args, "web.config.file")
        web_config = load_web_config(web_file) if web_file else None
        timeouts = timeouts_from_args(args)
    except (ConfigError, ValueError) as exc:
        print(f"lockstep fabric-exporter: error: {exc}", file=sys.stderr)
        return 2
    log.info("starting lockstep fabric exporter", extra=kv(version=VERSION, interval_s=config.interval_s,
                                                           node_timeout_s=config.node_timeout_s, workers=config.workers))
    asyncio.run(serve(create_app(config, AppOptions(web_config=web_config)), listen, web_config, timeouts=timeouts))
    return 0
