"""The node agent's configuration: built once from flags, frozen, handed to every collector."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lockstep.exporters.toolkit.listen import ListenAddress
from lockstep.exporters.toolkit.webconfig import WebConfig


@dataclass(frozen=True)
class ExporterConfig:
    listen: ListenAddress = ListenAddress(None, 9840)
    telemetry_path: str = "/metrics"
    sysfs: Path = Path("/sys")
    procfs: Path = Path("/proc")
    # Where the host's / is mounted (a container): NFS and Lustre mount points are read under it.
    rootfs: Path = Path("/")
    node_name: str = ""
    web_config: WebConfig | None = None
    collectors: tuple[str, ...] = ()
    # Collector-specific flags by their dotted name (e.g. "gpu.backend"); each collector validates
    # its own into its frozen ``<Name>Options.from_config(config)`` in its factory.
    flags: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def flag(self, name: str, default: Any = None) -> Any:
        value = self.flags.get(name)
        return default if value is None else value


def number_flag(config: ExporterConfig, name: str, default: float, *, above: float | None = None,
                at_least: float | None = None, integer: bool = False) -> Any:
    """The value of ``--name`` (``default`` when unset) as a float, or an int with ``integer``; one that is not a
    number (NaN included), is not above ``above`` or is below ``at_least`` raises ValueError naming the flag."""
    raw = config.flag(name, default)
    try:
        value = int(raw) if integer else float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"--{name}: {raw!r} is not {'an integer' if integer else 'a number'}") from None
    if value != value:
        raise ValueError(f"--{name}: {raw!r} is not a number")
    if above is not None and not value > above:
        raise ValueError(f"--{name}: must be above {above:g}, got {value:g}")
    if at_least is not None and value < at_least:
        raise ValueError(f"--{name}: must be at least {at_least:g}, got {value:g}")
    return value


def regex_flag(name: str, pattern: str) -> re.Pattern[str]:
    """The value of ``--name`` compiled; a bad one raises ValueError naming the flag."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"--{name}: invalid regular expression {pattern!r}: {exc}") from None
