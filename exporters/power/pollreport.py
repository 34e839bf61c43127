"""What one poll of a target left out of its readings, counted where it happens: members of a
Redfish array past the cap (``redfish.MAX_MEMBERS``) and readings that are not finite numbers.

The parsers stay pure functions of their documents. They report to the poll in progress through a
context variable: each poll runs in a task of its own, and every task it starts inherits the same
report. Called outside a poll (a test, a fuzz target), they report nowhere."""
from __future__ import annotations

import contextlib
import math
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from lockstep.exporters.toolkit.sample import Sample


@dataclass
class PollReport:
    invalid_readings: int = 0   # NaN, ±Inf, a number past a float's range: left out
    skipped_members: int = 0    # members of arrays past the cap: never read
    first_truncated: str = ""   # the first array cut short (a collection's @odata.id), for the log
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
