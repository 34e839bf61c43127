"""Prometheus text exposition (format 0.0.4) parsed into plain samples, for the systems whose interface
is a Prometheus endpoint (MinIO, Ceph's exporter). Pure: text in, tuples out."""
from __future__ import annotations

import math
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.storagesys.errors import AnswerError


class PromSample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def parse_samples(text: str, prefix: str) -> list[PromSample]:
    """Every sample whose name starts with ``prefix``; an answer that is not exposition text, or holds
    no sample of ``prefix`` at all, is an ``AnswerError`` (a login page or another service's metrics
    answered with 200 would otherwise read as a healthy system with nothing in it). Samples whose
    value is not finite are left out."""
    try:
        found = [PromSample(s.name, dict(s.labels), float(s.value))
                 for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name.startswith(prefix)]
    except Exception as exc:  # the parser raises ValueError, IndexError, ... on text it cannot read
        raise AnswerError(f"not Prometheus text exposition: {type(exc).__name__}: {str(exc)[:120]}") from None
    if not found:
        raise AnswerError(f"no {prefix}* sample in the answer")
    return [s for s in found if math.isfinite(s.value)]
