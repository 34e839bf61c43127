"""The command line every multi-target exporter shares (power, switch and storage exporters): ``--config FILE``
and ``--config.check``, the web flags, and what they load before the exporter serves: its config, the listen
address, the web config and the connection timeouts, or the exit status of a clear error or a checked config."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable

from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
from lockstep.exporters.toolkit.listen import parse_listen_address
from lockstep.exporters.toolkit.logs import setup_from_args
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags
from lockstep.exporters.toolkit.webconfig import load_web_config


@dataclass(frozen=True)
class Serving:
    """What an exporter starts from, all read and checked before anything listens."""
    config: Any
    listen: Any
    web_config: Any
    timeouts: Any


def add_flags(p: argparse.ArgumentParser, listen: str, config_help: str, check_help: str) -> None:
    p.add_argument("--config", dest="config", required=True, metavar="FILE", help=config_help)
    p.add_argument("--config.check", dest="config.check", action="store_true", help=check_help)
    add_web_flags(p, listen)


def load(args: argparse.Namespace, command: str, load_config: Callable[[str], Any]) -> Serving | int:
    """The exporter's ``Serving``, or an exit status: 2 after an error naming what is wrong (the config's file,
    line and key), 0 once ``--config.check`` found the config sound. Sets up logging first."""
    setup_from_args(args)
    try:
        config = load_config(args.config)
        listen = parse_listen_address(getattr(args, "web.listen-address"))
        web_file = getattr(args, "web.config.file")
        web_config = load_web_config(web_file) if web_file else None
        timeouts = timeouts_from_args(args)
    except (ConfigError, ValueError) as exc:
        print(f"lockstep {command}: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "config.check"):
        print(f"{args.config}: ok, {len(config.targets)} targets")
        return 0
    return Serving(config, listen, web_config, timeouts)
