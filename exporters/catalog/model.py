"""The ``Metric`` record every catalog section is made of."""
from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"

_NAME = re.compile(r"^lockstep_[a-z0-9_]+$")
_LABEL = re.compile(r"^[a-z_][a-z0-9_]*$")
# Prometheus naming guide: base units as the name's suffix.
UNITS = ("", "bytes", "seconds", "watts", "celsius", "hertz", "joules", "ratio",
         "bytes_per_second", "info", "cubic_meters_per_second", "pascals")


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric family: name, type, help text, label names (in emission order) and base unit."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...] = ()
    unit: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"metric name {self.name!r} must match {_NAME.pattern}")
        if self.type not in (COUNTER, GAUGE):
            raise ValueError(f"{self.name}: type must be counter or gauge, not {self.type!r}")
        if (self.type == COUNTER) != self.name.endswith("_total"):
            raise ValueError(f"{self.name}: counters and only counters end in _total")
        if self.unit not in UNITS:
            raise ValueError(f"{self.name}: unit {self.unit!r} is not a base unit")
        for label in self.labels:
            if not _LABEL.match(label) or label in ("job", "instance", "le", "quantile"):
                raise ValueError(f"{self.name}: label {label!r} is reserved or malformed")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"{self.name}: duplicate label")


def counter(name: str, help: str, labels: tuple[str, ...] = (), unit: str = "") -> Metric:
    return Metric(name, COUNTER, help, labels, unit)


def gauge(name: str, help: str, labels: tuple[str, ...] = (), unit: str = "") -> Metric:
    return Metric(name, GAUGE, help, labels, unit)
