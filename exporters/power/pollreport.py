"""What one poll of a target left out of its readings, counted where it happens: members of a
Redfish array past the cap (``redfish.MAX_MEMBERS``) and readings that are not finite numbers; and
what it shortened: label values from a BMC's answers past ``MAX_LABEL_CHARS``.

The parsers stay pure functions of their documents. They report to the poll in progress through a
context variable: each poll runs in a task of its own, and every task it starts inherits the same
report. Called outside a poll (a test, a fuzz target), they report nowhere."""
from __future__ import annotations

import contextlib
import hashlib
import math
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from lockstep.exporters.power.config import MAX_LABEL_CHARS
from lockstep.exporters.toolkit.sample import Sample

_HASH_CHARS = 12


@dataclass
class PollReport:
    invalid_readings: int = 0   # NaN, ±Inf, a number past a float's range: left out
    skipped_members: int = 0    # members of arrays past the cap: never read
    first_truncated: str = ""   # the first array cut short (a collection's @odata.id), for the log
    long_labels: set[str] = field(default_factory=set)   # label values shortened (their short form)
    first_long_label: str = ""  # the first of them, cut for the log
    # (object, key) of each invalid reading counted: read twice (a fallback order reads a property to
    # decide, then to use it), it is one reading. The objects are held, so that their ids stay theirs.
    _counted: dict[tuple[int, str], object] = field(default_factory=dict)


_CURRENT: ContextVar[PollReport | None] = ContextVar("lockstep_power_poll_report", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[PollReport]:
    """A fresh report for the poll run inside the ``with`` block (and the tasks it starts)."""
    report = PollReport()
    token = _CURRENT.set(report)
    try:
        yield report
    finally:
        _CURRENT.reset(token)


def invalid_reading(doc: object, key: str) -> None:
    """``doc[key]`` (a JSON object's property) is a number but not a finite one."""
    report = _CURRENT.get()
    if report is not None and (id(doc), key) not in report._counted:
        report._counted[(id(doc), key)] = doc
        report.invalid_readings += 1


def skipped_members(count: int, where: str = "") -> None:
    report = _CURRENT.get()
    if report is not None and count > 0:
        report.skipped_members += count
        report.first_truncated = report.first_truncated or where[:120]  # the BMC's text: bounded in the log


def keep_finite(samples: Iterable[Sample]) -> tuple[Sample, ...]:
    """The samples whose value is a finite number; the others are counted as invalid readings. Every
    reading of a poll passes here on its way out, so a value made non-finite by arithmetic on valid
    readings (a sum past a float's range, kWh scaled to joules) or by a parser that does not go
    through ``redfish.number`` (IPMI's text) is left out too, never served as NaN or ±Inf."""
    kept, dropped = [], 0
    for sample in samples:
        if math.isfinite(sample.value):
            kept.append(sample)
        else:
            dropped += 1
    report = _CURRENT.get()
    if report is not None:
        report.invalid_readings += dropped
    return tuple(kept)


def shortened(value: str) -> str:
    """``value`` if it fits ``MAX_LABEL_CHARS``, else its head, '~' and a hash of the whole: still one
    series per distinct value (two long Ids sharing their first 115 characters stay two series)."""
    if len(value) <= MAX_LABEL_CHARS:
        return value
    digest = hashlib.sha256(value.encode(errors="replace")).hexdigest()[:_HASH_CHARS]
    return f"{value[:MAX_LABEL_CHARS - _HASH_CHARS - 1]}~{digest}"


def shorten_labels(samples: Iterable[Sample]) -> list[Sample]:
    """The samples with every label value past ``MAX_LABEL_CHARS`` shortened, each such value counted
    once: a BMC naming a chassis with a megabyte of text costs its readings nothing, and a scrape and
    Prometheus' index a bounded label."""
    report = _CURRENT.get()
    out = []
    for sample in samples:
        if all(len(v) <= MAX_LABEL_CHARS for v in sample.labels):
            out.append(sample)
            continue
        labels = tuple(shortened(v) for v in sample.labels)
        if report is not None:
            long = {short for v, short in zip(sample.labels, labels) if short is not v}
            report.first_long_label = report.first_long_label or min(long)[:60]
            report.long_labels |= long
        out.append(sample._replace(labels=labels))
    return out
