"""An exporter's exposition read back by prometheus_client's own parser (an independent reader)."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def parse(text: str) -> dict[tuple, float]:
    """Exposition text -> {(name, (label pairs...)): value}, by prometheus_client's own parser."""
    values = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values
