"""What a collector yields: one value of a catalog metric with its label values in catalog order."""
from __future__ import annotations

from typing import NamedTuple

from lockstep.exporters.catalog.model import Metric


class Sample(NamedTuple):
    metric: Metric
    labels: tuple[str, ...]
    value: float
