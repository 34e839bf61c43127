"""NCCL Inspector's Prometheus textfiles: ``<NCCL_INSPECTOR_DUMP_DIR>/nccl_inspector_metrics_<uuid>.prom``.

The Inspector profiler plugin (``plugins/profiler/inspector/inspector_prom.cc`` in NVIDIA/nccl; the format facts
and their sources: tests/fixtures/nccl-inspector/README.md) writes one file per GPU, named by the CUDA device's UUID
(``%02x`` bytes, 8-4-4-4-12, no ``GPU-`` prefix), and no PID. It rewrites the file in place (``fopen(..., "w")``,
then one ``fwrite`` and ``fflush`` per bucket) every dump interval, and removes it when the process finalizes; a
process that dies leaves it behind. So a reader may meet a file cut anywhere, and a file whose writer is gone.

Only sample lines, no ``# HELP``/``# TYPE``, no timestamps, values ``%.6g``. Two layouts:

- 2.29 (2.29.3-2.29.7): per communicator, its last collective of the interval, three lines
  (``nccl_algorithm_bandwidth_gbs``, ``nccl_bus_bandwidth_gbs``, ``nccl_collective_exec_time_microseconds``) under
  ``comm_id, hostname, rank, slurm_job, slurm_job_id, nranks, n_nodes, gpu_device_id, collective, coll_sn,
  timestamp, message_size``;
- 2.30 (2.30.3 and later): per bucket, two lines: ``nccl_bus_bandwidth_gbs`` and
  ``nccl_collective_exec_time_microseconds`` under ``version, slurm_job_id, node, gpu, comm_name, n_nodes, nranks,
  collective, message_size, algo_proto``, or ``nccl_p2p_bus_bandwidth_gbs`` and ``nccl_p2p_exec_time_microseconds``
  under ``version, slurm_job_id, node, gpu, comm_name, n_nodes, nranks, p2p_operation, message_size``.

``parse`` is strict: the whole file in the exposition format's sample-line grammar (bounded line length and label
count), UTF-8, ending with a line end, and every bucket with all of its lines; anything else raises
``InspectorFileError`` with the reason, and nothing of the file is used. Lines of other metric names are ignored (a
later NCCL may add some); a known family's line must carry its operation and message size labels.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

FILE_NAME = re.compile(r"^nccl_inspector_metrics_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.prom$")

COLLECTIVE, P2P = "collective", "p2p"
ALGORITHM_BW, BUS_BW, EXEC_TIME = ("nccl_algorithm_bandwidth_gbs", "nccl_bus_bandwidth_gbs",
                                   "nccl_collective_exec_time_microseconds")
P2P_BUS_BW, P2P_EXEC_TIME = "nccl_p2p_bus_bandwidth_gbs", "nccl_p2p_exec_time_microseconds"
FAMILIES = {ALGORITHM_BW: COLLECTIVE, BUS_BW: COLLECTIVE, EXEC_TIME: COLLECTIVE, P2P_BUS_BW: P2P, P2P_EXEC_TIME: P2P}
LAYOUT_2_29, LAYOUT_2_30 = "2.29", "2.30"
# The lines one bucket is written as (one snprintf, one fwrite): a bucket lacking one was cut.
GROUPS = {(COLLECTIVE, LAYOUT_2_29): {ALGORITHM_BW, BUS_BW, EXEC_TIME}, (COLLECTIVE, LAYOUT_2_30): {BUS_BW, EXEC_TIME},
          (P2P, LAYOUT_2_30): {P2P_BUS_BW, P2P_EXEC_TIME}}
OPERATION = {COLLECTIVE: "collective", P2P: "p2p_operation"}
# 2.29's labels that change with every rewrite (the collective's sequence number, the dump's UTC second).
CHURN = ("coll_sn", "timestamp")

MAX_LINE = 4096          # NCCL's own line buffer is 2048 bytes
MAX_LABELS = 32
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_VALUE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_UNESCAPE = re.compile(r"\\([\\\"n])")
# What NCCL writes: labels without escapes, nothing after the value. One match, then the pairs: a line of it parses
# several times faster than by the general scanner, which takes the rest of the format.
_PLAIN = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*",)*'
                    r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")\} (\S+)')
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')
_SIZE_RANGE = re.compile(r"^([0-9]+)-[0-9]+(B|KB|MB|GB|TB)$")          # 2.30: "4-5GB"
_SIZE_HUMAN = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(B|KB|MB|GB|TB)$")     # 2.29: "2.00GB", "512B"
_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


class InspectorFileError(ValueError):
    """A file that must not be served; ``reason`` is ``truncated`` or ``malformed``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket (2.30) or one communicator's last collective (2.29): NCCL's labels as written (less ``CHURN``)
    and its values by NCCL metric name."""

    kind: str                                 # COLLECTIVE or P2P
    layout: str                               # LAYOUT_2_29 or LAYOUT_2_30
    labels: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, float], ...]
    # ``labels`` by name, for ``label``: a bucket's labels are read a dozen times each time it is served anew
    named: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "named", dict(self.labels))

    def label(self, name: str) -> str:
        return self.named.get(name, "")

    def labels_of(self, names) -> tuple[str, ...]:
        """The values of ``names``, "" for a label it lacks."""
        get = self.named.get
        return tuple(get(name, "") for name in names)

    @property
    def operation(self) -> str:
        return self.label(OPERATION[self.kind])

    @property
    def communicator(self) -> tuple[str, str, str, str]:
        """What tells one communicator of a GPU from another: 2.29's hash, 2.30's name, and their sizes."""
        return self.label("comm_id"), self.label("comm_name"), self.label("nranks"), self.label("n_nodes")


def message_size_bytes(text: str) -> int:
    """The lower bound of a ``message_size`` label in bytes (2.30's ``4-5GB`` range or 2.29's ``2.00GB``), -1 for
    a value of neither form. Units are binary: NCCL divides by 1024."""
    if m := _SIZE_RANGE.match(text):
        return int(m.group(1)) * _UNITS[m.group(2)]
    if m := _SIZE_HUMAN.match(text):
        return int(float(m.group(1)) * _UNITS[m.group(2)])
    return -1


def parse_line(line: str) -> Line:
    """One sample line: ``name{label="value",...} value``, nothing after the value. Raises ``ValueError``."""
    if len(line) > MAX_LINE:
        raise ValueError(f"line of {len(line)} characters, at most {MAX_LINE}")
    if plain := _PLAIN.fullmatch(line):
        return _line(plain.group(1), tuple(_PAIR.findall(plain.group(2))), plain.group(3))
    m = _NAME.match(line)
    if m is None:
        raise ValueError("no metric name")
    name, at, labels = m.group(), m.end(), []
    if at < len(line) and line[at] == "{":
        at += 1
        while at < len(line) and line[at] != "}":
            lm = _LABEL.match(line, at)
            if lm is None:
                raise ValueError(f"bad label at column {at + 1}")
            labels.append((lm.group(1), _UNESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1),
                                                      lm.group(2))))
            at = lm.end()
            if at < len(line) and line[at] == ",":
                at += 1
            elif at < len(line) and line[at] != "}":
                raise ValueError(f"expected , or }} at column {at + 1}")
        if at >= len(line):
            raise ValueError("labels not closed")
        at += 1
    if at >= len(line) or line[at] != " ":
        raise ValueError("no space before the value")
    return _line(name, tuple(labels), line[at + 1:])


def _line(name: str, labels: tuple[tuple[str, str], ...], text: str) -> Line:
    if len(labels) > MAX_LABELS:
        raise ValueError(f"{len(labels)} labels, at most {MAX_LABELS}")
    if len({k for k, _ in labels}) != len(labels):
        raise ValueError("a label named twice")
    return Line(name, labels, _value(text))


def _value(text: str) -> float:
    if not _VALUE.fullmatch(text):
        raise ValueError(f"value {text[:40]!r} is not a finite number")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"value {text[:40]!r} is not finite")
    return value


def _known(name: str, labels: tuple[tuple[str, str], ...]) -> _Known:
    kind = FAMILIES.get(name)
    if kind is None:
        return _Known(name, labels, None)
    present = {k for k, _ in labels}
    lacks = next((required for required in (OPERATION[kind], "message_size") if required not in present), "")
    return _Known(name, labels, kind, lacks)


def _layout(kind: str, labels: dict[str, str]) -> str:
    if kind == COLLECTIVE and ("comm_id" in labels or "coll_sn" in labels or "rank" in labels):
        return LAYOUT_2_29
    return LAYOUT_2_30


@dataclass(frozen=True, slots=True)
class _Known:
    """A line's part before its value, read once: what every line of it is, whatever its value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    kind: str | None                          # None: a family this reader does not know (its lines are ignored)
    lacks: str = ""                           # a label a known family's line must carry and this one does not


def parse(data: bytes, memo: dict[str, _Known] | None = None) -> tuple[Bucket, ...]:
    """The buckets of one whole file, in file order (a bucket written twice: the later values, in the first place).
    Raises ``InspectorFileError``; an empty file has no buckets. ``memo``: what the lines of the file's last read
    were, by their part before the value; NCCL rewrites the same lines with new values, so a line found there is not
    read again (the memo is left holding this read's lines)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InspectorFileError("malformed", f"not UTF-8: {exc}") from None
    if text and not text.endswith("\n"):
        raise InspectorFileError("truncated", "no line end at the end: cut while written")
    before = memo if memo is not None else {}
    now: dict[str, _Known] = {}
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, float]] = {}
    for number, line in enumerate(text.split("\n")[:-1], 1):
        if not line or line.startswith("#"):
            continue
        head, _, tail = line.rpartition(" ")     # a value holds no space: the last one is before it
        known = before.get(head) or now.get(head)
        try:
            if known is None or len(line) > MAX_LINE:
                parsed = parse_line(line)
                known = _known(parsed.name, parsed.labels)
                value = parsed.value
            else:
                value = _value(tail)
        except ValueError as exc:
            raise InspectorFileError("malformed", f"line {number}: {exc}") from None
        now[head] = known
        if known.kind is None:
            continue
        if known.lacks:
            raise InspectorFileError("malformed", f"line {number}: {known.name} without {known.lacks}")
        groups.setdefault((known.kind, known.labels), {})[known.name] = value
    if memo is not None:
        memo.clear()
        memo.update(now)
    buckets: dict[tuple, Bucket] = {}
    for (kind, labels), values in groups.items():
        layout = _layout(kind, dict(labels))
        missing = GROUPS[(kind, layout)] - values.keys()
        if missing:
            raise InspectorFileError("truncated", f"a {kind} bucket without {', '.join(sorted(missing))}: cut while "
                                                  "written")
        kept = tuple((k, v) for k, v in labels if k not in CHURN)
        buckets[(kind, kept)] = Bucket(kind, layout, kept, tuple(sorted(values.items())))
    return tuple(buckets.values())
