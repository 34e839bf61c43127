"""`lockstep alerts quarantine-receiver`: flags → one frozen QuarantineConfig → the aiohttp app.

The bearer token comes from a file or an environment variable, never from argv (argv is world-readable
in /proc). Dry run is the default; ``--execute`` makes it call scontrol.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from lockstep.alerts.quarantine_app import QuarantineConfig, create_app
from lockstep.exporters.toolkit.listen import parse_listen_address
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags

TOKEN_ENV = "LOCKSTEP_QUARANTINE_TOKEN"


def add_parser(sub: argparse._SubParsersAction) -> None:
    # allow_abbrev=False: `--token SECRET` must be an error, not an abbreviation of --token-file.
    p = sub.add_parser("quarantine-receiver", allow_abbrev=False,
                       help="Alertmanager webhook that drains faulty nodes in Slurm",
                       description="Alertmanager webhook (POST /alerts) that drains nodes with hardware faults "
                       "(uncorrectable ECC, an XID whose recovery needs the node empty, a GPU missing or off the bus, "
                       "IB link down, "
                       "row remap pending or failed) via scontrol. Dry run "
                       f"unless --execute. Bearer token from --token-file or ${TOKEN_ENV}.")
    # Loopback by default: it runs next to Alertmanager, and it can drain nodes.
    add_web_flags(p, "127.0.0.1:9844", web_config=False)
    p.add_argument("--token-file", type=Path, default=None, help="file holding the bearer token")
    p.add_argument("--execute", action="store_true", help="really run scontrol (default: dry run, log only)")
    p.add_argument("--max-drains-per-hour", type=int, default=2, help="never drain more nodes than this per hour")
    p.add_argument("--scontrol", default="scontrol", help="scontrol executable (looked up on PATH)")
    p.add_argument("--state-file", type=Path, default=None,
                   help="JSON file remembering drained nodes and the hourly budget across restarts")
    p.add_argument("--node-inventory", type=Path, default=None, metavar="FILE",
                   help="the nodes that may be drained, one per line (sinfo -h -N -o %%N | sort -u); re-read "
                        "when it changes; required with --execute: a node label is only a claim")
    p.add_argument("--max-drained-fraction", type=float, default=0.1,
                   help="circuit breaker: drain no more once this share of the inventory stands drained "
                        "(default 0.1; at least one node)")
    add_log_flags(p)


def config_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> QuarantineConfig:
    environ = os.environ if environ is None else environ
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise ValueError(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
    else:
        token = environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ValueError(f"no bearer token: pass --token-file FILE or set ${TOKEN_ENV}")
    if args.max_drains_per_hour < 1:
        raise ValueError("--max-drains-per-hour must be >= 1")
    if not 0 < args.max_drained_fraction <= 1:
        raise ValueError("--max-drained-fraction must be in (0, 1]")
    if args.execute and args.node_inventory is None:
        raise ValueError("--execute needs --node-inventory FILE: without it any alert could drain any name")
    return QuarantineConfig(token=token, dry_run=not args.execute, max_drains_per_hour=args.max_drains_per_hour,
                            scontrol=args.scontrol, state_file=args.state_file, inventory=args.node_inventory,
                            max_drained_fraction=args.max_drained_fraction)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from lockstep.exporters.toolkit import logs
    from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
    from lockstep.exporters.toolkit.web import serve
    try:
        config = config_from_args(args)
        listen = parse_listen_address(getattr(args, "web.listen-address"))
        timeouts = timeouts_from_args(args)
        app = create_app(config)
    except ValueError as exc:
        print(f"lockstep alerts quarantine-receiver: {exc}", file=sys.stderr)
        return 2
    logs.setup_from_args(args)
    logging.getLogger("lockstep.quarantine").info(
        "starting quarantine receiver", extra=kv(address=str(listen), dry_run=config.dry_run,
                                                 max_drains_per_hour=config.max_drains_per_hour))
    asyncio.run(serve(app, listen, None, timeouts=timeouts))
    return 0
