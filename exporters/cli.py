"""``lockstep exporter``: the node agent. Flags follow node_exporter's."""
from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from lockstep.exporters import registry
from lockstep.exporters.catalog import health
from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.registry import Collector, CollectorSpec
from lockstep.exporters.scrape import BrokenCollector, Scraper
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.exporters.toolkit.helpformat import DefaultsHelpFormatter
from lockstep.exporters.toolkit.listen import parse_listen_address
from lockstep.exporters.toolkit.logs import add_flags as add_log_flags
from lockstep.exporters.toolkit.logs import kv, setup_from_args
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags

log = logging.getLogger("lockstep.exporter")

# What ``--sim.node-root DIR/<node>`` stands for (docs/architecture.md): each collector's own flag, set
# from the simulated node's layout.
SIM_NODE_FLAGS: Mapping[str, Callable[[SimNode], str]] = MappingProxyType({
    "path.sysfs": lambda node: str(node.sysfs),
    "path.procfs": lambda node: str(node.procfs),
    "pfc.source": lambda node: f"dir:{node.ethtool}",
    "gpu.backend": lambda node: f"sim:{node.gpus}",
    "jobs.mapping-dir": lambda node: str(node.job_mapping),
    "validation.results-dir": lambda node: str(node.validation_results),
    # used where the simulator presents the node the Kubernetes way (--jobs.source=auto finds the socket)
    "jobs.kubernetes.kubelet-socket": lambda node: str(node.kubelet_socket),
    "jobs.kubernetes.kubeconfig": lambda node: str(node.kubeconfig),
    "node.name": lambda node: node.name,
    # the node's simulated NCCL RAS service, where it runs one (the job's nodes; --collector.nccl-ras reads it)
    "nccl-ras.address": lambda node: _first_line(node.nccl_ras_address),
    # read by the off-by-default nccl-inspector and steps collectors when enabled
    "nccl-inspector.dir": lambda node: str(node.nccl_inspector),
    "steps.socket": lambda node: str(node.steps_socket),
})


def _first_line(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def extra_modules(argv: Sequence[str]) -> list[str]:
    """Values of ``--collector.extra-module`` (needed before the parser exists: they add flags)."""
    found = []
    for i, arg in enumerate(argv):
        if arg.startswith("--collector.extra-module="):
            found.append(arg.split("=", 1)[1])
        elif arg == "--collector.extra-module" and i + 1 < len(argv):
            found.append(argv[i + 1])
    return found


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    try:
        specs = registry.load(extra_modules(argv))
    except ImportError as exc:
        print(f"lockstep exporter: error: --collector.extra-module: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    p = subparsers.add_parser(
        "exporter", help="run the node agent (GPU, fabric, storage collectors) serving /metrics",
        description="The lockstep node agent: one per GPU server, scraped by Prometheus. "
                    "Flags follow node_exporter's.", allow_abbrev=False,
        formatter_class=DefaultsHelpFormatter)
    web = p.add_argument_group("web")
    add_web_flags(web, ":9840")
    web.add_argument("--web.telemetry-path", dest="web.telemetry-path", default="/metrics",
                     help="path under which to expose metrics")
    paths = p.add_argument_group("paths")
    paths.add_argument("--path.sysfs", dest="path.sysfs", default=None, help="sysfs mount point (default /sys)")
    paths.add_argument("--path.procfs", dest="path.procfs", default=None, help="procfs mount point (default /proc)")
    paths.add_argument("--path.rootfs", dest="path.rootfs", default="/",
                       help="host root filesystem mount point: NFS and Lustre mounts outside it (a container's "
                            "own) are skipped, and mount labels drop the prefix")
    paths.add_argument("--sim.node-root", dest="sim.node-root", default=None,
                       help="read a simulated node written by `lockstep sim run`: DIR/<node>, shorthand for "
                            f"{', '.join('--' + flag for flag in SIM_NODE_FLAGS)} (each one given explicitly wins)")
    paths.add_argument("--node.name", dest="node.name", default=None,
                       help="node name reported in lockstep_node_info (default: hostname, or the sim node)")
    logs = p.add_argument_group("logging")
    add_log_flags(logs)
    col = p.add_argument_group("collectors", "enable with --collector.NAME, disable with --no-collector.NAME")
    col.add_argument("--collector.disable-defaults", dest="collector.disable-defaults", action="store_true",
                     help="disable every collector not explicitly enabled")
    col.add_argument("--collector.extra-module", dest="collector.extra-module", action="append", default=[],
                     metavar="MODULE", help="import a Python module that registers more collectors")
    for spec in specs.values():
        state = "enabled" if spec.default_enabled else "disabled"
        col.add_argument(f"--collector.{spec.name}", dest=f"collector.{spec.name}", action="store_true",
                         default=None, help=f"{spec.help} ({state} by default)")
        col.add_argument(f"--no-collector.{spec.name}", dest=f"collector.{spec.name}", action="store_false",
                         default=None, help=argparse.SUPPRESS)
    for spec in specs.values():
        if spec.add_flags:
            spec.add_flags(p.add_argument_group(f"collector {spec.name}"))
    p.set_defaults(func=run, _specs=specs)


def expand_sim_node_root(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The flags with ``--sim.node-root`` expanded into the flags it stands for; a flag given
    explicitly (not None) is kept."""
    flags = dict(flags)
    if not flags.get("sim.node-root"):
        return flags
    root = Path(flags["sim.node-root"])
    if not root.is_dir():
        raise ValueError(f"--sim.node-root: {root} is not a directory (start `lockstep sim run` first?)")
    node = SimNode.at(root)
    for flag, value in SIM_NODE_FLAGS.items():
        if flags.get(flag) is None:
            flags[flag] = value(node)
    return flags


def config_from_args(args: argparse.Namespace) -> ExporterConfig:
    """One frozen, validated config from the parsed flags (raises ConfigError or ValueError)."""
    from lockstep.exporters.toolkit.webconfig import load_web_config

    flags = expand_sim_node_root(vars(args))
    specs: Mapping[str, CollectorSpec] = flags["_specs"]
    defaults_on = not flags["collector.disable-defaults"]
    chosen = {name: flags.get(f"collector.{name}") for name in specs}  # True/False when a flag named it
    enabled = tuple(name for name, spec in specs.items()
                    if chosen[name] or (chosen[name] is None and spec.default_enabled and defaults_on))
    web_file = flags["web.config.file"]
    rootfs = Path(flags["path.rootfs"])
    if not rootfs.is_absolute():
        raise ValueError(f"--path.rootfs must be an absolute path, got {flags['path.rootfs']!r}")
    path = flags["web.telemetry-path"]
    if not path.startswith("/"):
        raise ValueError(f"--web.telemetry-path must start with '/', got {path!r}")
    return ExporterConfig(
        listen=parse_listen_address(flags["web.listen-address"]),
        telemetry_path=path,
        sysfs=Path(flags["path.sysfs"] or "/sys"),
        procfs=Path(flags["path.procfs"] or "/proc"),
        rootfs=rootfs,
        node_name=flags["node.name"] or socket.gethostname(),
        web_config=load_web_config(web_file) if web_file else None,
        collectors=enabled,
        flags=MappingProxyType({k: v for k, v in flags.items() if not k.startswith("_") and k != "func"}),
    )


def build_collectors(config: ExporterConfig, specs: Mapping[str, CollectorSpec]) -> dict[str, Collector]:
    """Construct the enabled collectors. A bad flag (ConfigError/ValueError) stops the agent; any other
    start-up failure (missing device, library) is reported per scrape by a ``BrokenCollector``."""
    built: dict[str, Collector] = {}
    for name in config.collectors:
        try:
            built[name] = specs[name].factory(config)
        except (ConfigError, ValueError):
            for collector in built.values():
                getattr(collector, "close", lambda: None)()
            raise
        except Exception as exc:
            log.error("collector failed to start", extra=kv(collector=name, err=f"{type(exc).__name__}: {exc}"))
            built[name] = BrokenCollector(exc)
    return built


def static_samples(config: ExporterConfig) -> list[Sample]:
    return [Sample(health.EXPORTER_BUILD_INFO, (VERSION, "exporter"), 1.0),
            Sample(health.NODE_INFO, (config.node_name,), 1.0)]


def build_scraper(config: ExporterConfig, specs: Mapping[str, CollectorSpec]) -> Scraper:
    return Scraper(build_collectors(config, specs), static_samples(config))


def run(args: argparse.Namespace) -> int:
    from lockstep.exporters.server import create_app
    from lockstep.exporters.toolkit.conntimeouts import from_args as timeouts_from_args
    from lockstep.exporters.toolkit.web import serve

    setup_from_args(args)
    try:
        config = config_from_args(args)
        timeouts = timeouts_from_args(args)
        scraper = build_scraper(config, args._specs)
    except (ConfigError, ValueError) as exc:
        print(f"lockstep exporter: error: {exc}", file=sys.stderr)
        return 2
    log.info("starting lockstep exporter", extra=kv(version=VERSION, node=config.node_name,
                                                    collectors=",".join(config.collectors)))
    asyncio.run(serve(create_app(config, scraper), config.listen, config.web_config, timeouts=timeouts))
    return 0
