"""One stored validation result: a parsed run (or a run that timed out or failed) with its test, nodes and time."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from lockstep.validation.model import Check, Figure, Parsed, run_status

# A node directory name: one plain host name (short form, as nccl-tests prints it).
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_TEST_CHARS = 128
MAX_MESSAGE_CHARS = 2000


def short_node(name: str) -> str:
    """``gpu17.cluster.example`` -> ``gpu17``: nccl-tests and Slurm name nodes by their short host name."""
    short = name.strip().split(".", 1)[0]
    if not NODE.fullmatch(short):
        raise ValueError(f"node name {name!r} is not a plain host name")
    return short


def check_test(test: str) -> str:
    if not test or len(test) > MAX_TEST_CHARS or not test.isprintable():
        raise ValueError(f"test name {test!r} must be 1-{MAX_TEST_CHARS} printable characters")
    return test


@dataclass(frozen=True)
class Result:
    kind: str
    test: str
    nodes: tuple[str, ...]
    status: str
    started: float
    duration_seconds: float | None     # None when unknown (an ingested file)
    figures: tuple[Figure, ...] = ()
    checks: tuple[Check, ...] = ()
    tool_version: str = ""
    message: str = ""
    source: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        run_status(self.status)
        check_test(self.test)
        if not self.nodes:
            raise ValueError("a result covers at least one node")
        object.__setattr__(self, "nodes", tuple(sorted({short_node(n) for n in self.nodes})))
        object.__setattr__(self, "message", self.message[-MAX_MESSAGE_CHARS:])

    @property
    def scale(self) -> int:
        return len(self.nodes)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "warn")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "test": self.test, "scale": self.scale, "nodes": list(self.nodes),
                "status": self.status, "ok": self.ok, "started": self.started,
                "duration_seconds": self.duration_seconds, "tool_version": self.tool_version,
                "figures": {f.key: f.value for f in self.figures},
                "figure_list": [[f.subject, f.name, f.unit, f.value] for f in self.figures],
                "checks": [{"name": c.name, "subject": c.subject, "status": c.status, "message": c.message}
                           for c in self.checks],
                "message": self.message, "source": self.source, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        duration = d.get("duration_seconds")
        return cls(d["kind"], d["test"], tuple(d["nodes"]), d["status"], float(d["started"]),
                   None if duration is None else float(duration),
                   tuple(Figure(name, unit, float(value), subject) for subject, name, unit, value in d["figure_list"]),
                   tuple(Check(c["name"], c["status"], c["subject"], c["message"]) for c in d["checks"]),
                   d.get("tool_version", ""), d.get("message", ""), d.get("source", ""), d.get("detail") or {})


def from_parsed(parsed: Parsed, test: str, nodes: tuple[str, ...], started: float, duration: float | None,
                source: str) -> Result:
    failed: dict[tuple[str, str], list[str]] = {}
    for c in parsed.checks:
        if c.status == "fail":
            failed.setdefault((c.name, c.message), []).append(c.subject)
    message = parsed.error or "; ".join(f"{name} {','.join(s for s in subjects if s)}: {text}".replace(" :", ":")
                                        for (name, text), subjects in failed.items())
    return Result(parsed.kind, test, nodes, parsed.status, started, duration, parsed.figures, parsed.checks,
                  parsed.tool_version, message, source, parsed.detail)


def default_test(kind: str, parsed_test: str) -> str:
    """The test's name when the operator gives none: what the output names, else the kind. nccl-tests
    before 2.13 never print which collective ran: six tests would land on one name, so that is an error."""
    if parsed_test:
        return parsed_test
    if kind == "nccl":
        raise ValueError("this nccl-tests output does not name its collective: give --test (all_reduce_perf, ...)")
    return "diag" if kind == "dcgm-diag" else kind   # as `run` names a dcgmi diag without -r


def with_gpu_count(result: Result, expected: int) -> Result:
    """``result`` with a ``gpu_count`` check: the GPUs the run reported on (DCGM entities, gpu-burn's GPUs)
    against ``expected``. A GPU that fell off the bus is not tested, and a diagnostic that passes on seven
    of eight GPUs is not a pass."""
    found = {s for s in [c.subject for c in result.checks] + [f.subject for f in result.figures] if s.startswith("gpu")}
    ok = len(found) == expected
    check = Check("gpu_count", "pass" if ok else "fail", "", f"{len(found)} GPUs tested, {expected} expected")
    status = result.status if ok or result.status in ("timeout", "error") else "fail"
    message = result.message if ok else "; ".join(m for m in (check.message, result.message) if m)
    return replace(result, checks=result.checks + (check,), status=status, message=message)
