"""What one poll of a target left out of its readings, counted where it happens: members of a
Redfish array past the cap (``redfish.MAX_MEMBERS``).

The parsers stay pure functions of their documents. They report to the poll in progress through a
context variable: each poll runs in a task of its own, and every task it starts inherits the same
report. Called outside a poll (a test, a fuzz target), they report nowhere."""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator


@dataclass
class PollReport:
    skipped_members: int = 0    # members of arrays past the cap: never read
    first_truncated: str = ""   # the first array cut short (a collection's @odata.id), for the log


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


def skipped_members(count: int, where: str = "") -> None:
    report = _CURRENT.get()
    if report is not None and count > 0:
        report.skipped_members += count
        report.first_truncated = report.first_truncated or where

