"""The ``Metric`` record every catalog section is made of."""
from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"

_NAME = re.compile(r"^lockstep_[a-z0-9_]+$")
_LABEL = re.compile(r"^[a-z_][a-z0-9_]*$")
# Another exporter's names, kept for compatibility (dcgm-exporter's DCGM_FI_* with UUID/modelName labels):
# any valid Prometheus name; never part of the catalog.
_FOREIGN_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_FOREIGN_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
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
    foreign: bool = False

    def __post_init__(self) -> None:
        name_re, label_re = (_FOREIGN_NAME, _FOREIGN_LABEL) if self.foreign else (_NAME, _LABEL)
        if not name_re.match(self.name):
            raise ValueError(f"metric name {self.name!r} must match {name_re.pattern}")
        if self.type not in (COUNTER, GAUGE):
            raise ValueError(f"{self.name}: type must be counter or gauge, not {self.type!r}")
        if not self.foreign and (self.type == COUNTER) != self.name.endswith("_total"):
            raise ValueError(f"{self.name}: counters and only counters end in _total")
        if self.unit not in UNITS:
            raise ValueError(f"{self.name}: unit {self.unit!r} is not a base unit")
        for label in self.labels:
            if not label_re.match(label) or label in ("job", "instance", "le", "quantile"):
                raise ValueError(f"{self.name}: label {label!r} is reserved or malformed")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"{self.name}: duplicate label")

    def __hash__(self) -> int:
        # Names are unique per catalog; the generated hash over every field (help text included) cost
        # ~0.3 µs per sample in the encoder's per-family dict lookups.
        return hash(self.name)


def counter(name: str, help: str, labels: tuple[str, ...] = (), unit: str = "") -> Metric:
    return Metric(name, COUNTER, help, labels, unit)


def gauge(name: str, help: str, labels: tuple[str, ...] = (), unit: str = "") -> Metric:
    return Metric(name, GAUGE, help, labels, unit)
