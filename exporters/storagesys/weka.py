"""WEKA clusters through the JSON-RPC answers of WEKA's management API (port 14000, ``/api/v1``; the calls are
``wekarpc``'s), mapped to the common storage-system metrics. Pure: answers in, buckets, counts and samples out.
The sources of every method, field and unit below are in tests/fixtures/weka/README.md.

What is read:
- ``stats_show`` of category ``ops`` for the whole cluster (no ``per_node``: the answer's one top key is ``all``),
  ``READS``, ``WRITES`` (operations per second), ``READ_BYTES``, ``WRITE_BYTES`` (bytes per second),
  ``READ_LATENCY``, ``WRITE_LATENCY`` (the mean per operation, microseconds). They are not counters: each list item
  is one minute, ``{"stats": {...}, "timestamp": ...}``, its values per-second averages over that minute. ``Counts``
  integrates them into the common counters at scope ``cluster``: a minute adds its rate times 60 to bytes and
  operations, and its mean latency times its operations to the latency total. The answer names no cluster, so the
  name is the target's own (the config's name for that cluster);
- ``filesystems_get_capacity``: per file system (keyed ``FSId<n>``) its ``name``, ``used_total`` and
  ``available_total``, bytes. ``available_total`` is the file system's size, not its free space: WEKA's own
  exporter reads ``used_total / available_total`` as the fraction used, and in WEKA's API description the free
  space (``free_total``) is ``available_total - used_total``. So ``used_bytes`` is ``used_total`` and
  ``capacity_bytes`` is ``available_total``, scope ``filesystem``, named by ``name``.

Per file system I/O (``stats_show`` of category ``fs_stats``) is not read: a further call per stat and poll, its
values keyed by file system id inside the stat's name."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterator, Mapping

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.toolkit.sample import Sample

CATEGORY = "ops"
STATS = ("READS", "WRITES", "READ_BYTES", "WRITE_BYTES", "READ_LATENCY", "WRITE_LATENCY")
# Five one-minute buckets per answer (WEKA's exporter asks the same): minutes a failed poll missed are still in
# the next answer, if it comes within five minutes.
INTERVAL = "5m"
BUCKET_S = 60.0          # each bucket's values are per-second averages over one minute
_MICROSECONDS = 1e-6     # READ_LATENCY, WRITE_LATENCY
OPS = ("read", "write")


def stats_params() -> dict[str, object]:
    """The ``stats_show`` parameters: the cluster's total (no ``per_node``), stats named ``category.STAT``."""
    return {"stat": [f"{CATEGORY}.{stat}" for stat in STATS], "interval": INTERVAL}


@dataclass(frozen=True)
class Bucket:
    at: datetime                                   # the minute's timestamp, aware
    stats: Mapping[str, float] = field(default_factory=dict)   # the stats read, a null or invalid one left out


def _timestamp(value: object) -> datetime:
    if not isinstance(value, str):
        raise AnswerError(f"stats_show: a bucket's timestamp is {type(value).__name__}, not a string")
    try:
        at = datetime.fromisoformat(value)   # "2021-08-16T15:23:00Z": Python 3.11 reads the Z
    except ValueError:
        raise AnswerError(f"stats_show: timestamp {value[:40]!r} is not ISO 8601") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)   # no offset: UTC, as the request asks


def _number(value: object) -> float | None:
    """A finite number not below zero; None for anything else (null, a histogram's list), which is skipped."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def parse_stats(result: object) -> list[Bucket]:
    """A ``stats_show`` result (``{"all": {"ops": [{"stats": {...}, "timestamp": ...}, ...]}}``) as its buckets,
    oldest first, one per timestamp (a repeated one: the last wins). No ``ops`` list: no buckets (nothing counted)."""
    if not isinstance(result, dict) or not isinstance(result.get("all"), dict):
        raise AnswerError('stats_show: no "all" object in the result')
    items = result["all"].get(CATEGORY)
    if items is None:
        return []
    if not isinstance(items, list):
        raise AnswerError(f'stats_show: "{CATEGORY}" is not a list')
    buckets: dict[datetime, Bucket] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("stats"), dict):
            raise AnswerError(f'stats_show: a "{CATEGORY}" item without "stats"')
        at = _timestamp(item.get("timestamp"))
        stats = {name: v for name in STATS if (v := _number(item["stats"].get(name))) is not None}
        buckets[at] = Bucket(at, stats)
    return [buckets[at] for at in sorted(buckets)]


def increments(bucket: Bucket) -> dict[tuple[Metric, str], float]:
    """What one minute adds to each counter, keyed (metric, op; "" for bytes): rates times 60 s, the latency as its
    mean times the operations (only where both are there)."""
    s, out = bucket.stats, {}
    for op in OPS:
        upper = op.upper()
        if f"{upper}_BYTES" in s:
            out[(m.READ_BYTES if op == "read" else m.WRITE_BYTES, "")] = s[f"{upper}_BYTES"] * BUCKET_S
        if f"{upper}S" in s:
            out[(m.OPERATIONS, op)] = s[f"{upper}S"] * BUCKET_S
            if f"{upper}_LATENCY" in s:
                out[(m.LATENCY, op)] = s[f"{upper}_LATENCY"] * _MICROSECONDS * s[f"{upper}S"] * BUCKET_S
    return out


class Counts:
    """One target's integrated counters. The first answer with buckets counts only its newest: the counters start
    at zero with the exporter (a reset, as for any counter), and Prometheus counts a reset's first value whole, so
    any minute in it that an earlier run of the exporter had counted is counted twice; one minute at most, not five.
    Each later answer counts its buckets newer than the newest counted: a minute counts once, the minutes a failed
    poll missed are counted by the next answer that still holds them (within five minutes), and a counter never goes
    backwards (an answer whose minutes are all older adds nothing)."""

    def __init__(self) -> None:
        self.newest: datetime | None = None
        self.totals: dict[tuple[Metric, str], float] = {}

    def add(self, buckets: list[Bucket]) -> None:
        if not buckets:
            return
        if self.newest is None:
            new = buckets[-1:]
        else:
            new = [b for b in buckets if b.at > self.newest]
        for bucket in new:
            for key, value in increments(bucket).items():
                self.totals[key] = self.totals.get(key, 0.0) + value
        if new:
            self.newest = new[-1].at

    def samples(self, target: str) -> Iterator[Sample]:
        """The counters counted so far (one never counted is absent, not zero), at scope cluster, named by the
        target (the answer names no cluster)."""
        key = (target, "cluster", target)
        for (metric, op), value in self.totals.items():
            yield Sample(metric, (*key, op) if op else key, value)


def parse_capacity(target: str, result: object) -> list[Sample]:
    """A ``filesystems_get_capacity`` result (``{"FSId<n>": {"name", "used_total", "available_total", ...}}``) as
    ``used_bytes`` and ``capacity_bytes`` per file system; an entry without a name, or a null size, is left out."""
    if not isinstance(result, dict):
        raise AnswerError("filesystems_get_capacity: the result is not an object")
    found: dict[str, list[Sample]] = {}
    for fs in result.values():
        if not isinstance(fs, dict) or not isinstance(fs.get("name"), str) or not fs["name"]:
            continue
        key = (target, "filesystem", fs["name"])
        found[fs["name"]] = [Sample(metric, key, value) for metric, field_ in ((m.USED, "used_total"),
                                                                               (m.CAPACITY, "available_total"))
                             if (value := _number(fs.get(field_))) is not None]
    return [s for name in sorted(found) for s in found[name]]
