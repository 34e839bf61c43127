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


def regex_flag(name: str, pattern: str) -> re.Pattern[str]:
    """The value of ``--name`` compiled; a bad one raises ValueError naming the flag."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"--{name}: invalid regular expression {pattern!r}: {exc}") from None
