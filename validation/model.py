"""What a parser returns and what the store keeps: figures in base units, checks, and the run's status."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lockstep.exporters.catalog.enums import CHECK_STATUSES, KINDS, RUN_STATUSES

UNITS = ("bytes_per_second", "per_second", "seconds", "errors", "")


class ParseError(ValueError):
    """Output that is empty, truncated or not the tool's: names the file and the line."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source, self.line, self.reason = source, line, reason


@dataclass(frozen=True)
class Figure:
    """One measured value in base units. ``unit`` '' marks a value kept for the report only (ranks)."""

    name: str
    unit: str
    value: float
    subject: str = ""

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"figure {self.name}: unit {self.unit!r} not one of {UNITS}")

    @property
    def key(self) -> str:
        return figure_key(self.subject, self.name, self.unit)


def figure_key(subject: str, name: str, unit: str) -> str:
    """``avg_busbw_bytes_per_second``, ``gpu3.flop_per_second``: a figure's name in JSON output and history."""
    base = f"{name}_{unit}" if unit else name
    return f"{subject}.{base}" if subject else base


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    subject: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} not one of {CHECK_STATUSES}")


@dataclass(frozen=True)
class Parsed:
    """A tool's output, parsed. ``hosts``: the nodes the output names (nccl-tests' ranks), if any;
    ``test``: the test the output names itself (``all_reduce_perf``), '' when it does not."""

    kind: str
    figures: tuple[Figure, ...] = ()
    checks: tuple[Check, ...] = ()
    hosts: tuple[str, ...] = ()
    test: str = ""
    tool_version: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    error: str = ""   # the tool reported that it could not run (DCGM's runtime_error): no judgement

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} not one of {KINDS}")

    @property
    def status(self) -> str:
        """error if the tool could not run, fail if any check failed, warn if any warned, else pass."""
        statuses = {c.status for c in self.checks}
        if self.error:
            return "error"
        return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"

    def figure_map(self) -> dict[str, float]:
        return {f.key: f.value for f in self.figures}


def run_status(status: str) -> str:
    if status not in RUN_STATUSES:
        raise ValueError(f"status {status!r} not one of {RUN_STATUSES}")
    return status
