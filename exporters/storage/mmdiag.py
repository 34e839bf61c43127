"""IBM Spectrum Scale (GPFS) waiters: ``mmdiag --waiters -Y``, one ``mmdiag:waiters:`` record per daemon thread
waiting now, its fields named by the ``HEADER`` record before it (threadName, waitTime in seconds, and the reason
in condVarReason, auxReason or delayReason); values are percent-encoded (tests/fixtures/spectrum-scale/README.md
has the layout). Reasons are free text: ``reason_class`` folds them into a few fixed classes for labels."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import unquote

# Reason text -> class, first match wins; every phrase below appears in published waiters output
# (tests/fixtures/spectrum-scale/README.md). Anything else is "other"; no reason at all is "none".
REASON_CLASSES = ("io", "network", "other", "none")
_CLASS_RULES = ((re.compile(r"I/O completion", re.I), "io"),
                (re.compile(r"\bsock\b|verbs|rdma", re.I), "network"))
_REASON_FIELDS = ("auxReason", "condVarReason", "delayReason")
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")   # waitTime as printed: "6861.7395"; ASCII digits only


@dataclass(frozen=True, slots=True)
class Waiter:
    thread: str
    seconds: float
    reason: str


def reason_class(reason: str) -> str:
    if not reason.strip():
        return "none"
    for pattern, name in _CLASS_RULES:
        if pattern.search(reason):
            return name
    return "other"


def parse_waiters(text: str, errors: list[str] | None = None) -> list[Waiter]:
    """Every ``mmdiag:waiters`` record; other lines (other sections, blank lines) are ignored. A record before any
    header, of another length than its header, or with a wait time that is not a decimal number of seconds loses that
    waiter alone (named in ``errors``)."""
    header: list[str] | None = None
    out: list[Waiter] = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split(":")
        if len(fields) < 3 or fields[0] != "mmdiag" or fields[1] != "waiters":
            continue
        if fields[2] == "HEADER":
            header = fields
            continue
        try:
            if header is None:
                raise ValueError("waiters record before its HEADER")
            if len(fields) != len(header):
                raise ValueError(f"{len(fields)} fields, header has {len(header)}")
            record = dict(zip(header, fields))
            if "waitTime" not in record or "threadName" not in record:
                raise ValueError("header names no waitTime or threadName")
            if not _SECONDS.fullmatch(record["waitTime"]) or not math.isfinite(seconds := float(record["waitTime"])):
                raise ValueError(f"wait time {record['waitTime'][:20]!r}")
        except ValueError as exc:
            if errors is not None:
                errors.append(f"line {number}: {str(exc)[:100]}")
            continue
        reason = next((unquote(record[f]) for f in _REASON_FIELDS if record.get(f, "").strip()), "")
        out.append(Waiter(unquote(record["threadName"]), seconds, reason.strip()))
    return out
