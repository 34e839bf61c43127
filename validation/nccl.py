"""nccl-tests (``all_reduce_perf`` and the other ``*_perf`` binaries): the stdout of one run, as printed by
``src/common.cu`` / ``src/util.cu`` of NVIDIA/nccl-tests.

Column layouts seen across versions (the header line, with or without its '#', after any launcher tag):
  2018-21    size count type [redop] [root]  time algbw busbw error    (twice: out-of-place, in-place)
  2022+      size count type redop root  time algbw busbw #wrong    (twice) [timestamp]
  -I/--report_per_iter   each half adds i_min i_max i_p99 i_cv%
``cputime`` may replace ``time``. Any other header is an error, not a guess. Bandwidths are GB/s with
GB = 1e9 bytes (nccl-tests divides by 1.0E9); times are microseconds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lockstep.validation.lines import Lines, scaled, to_float
from lockstep.validation.model import Check, Figure, Parsed, ParseError
from lockstep.validation.sizetable import SizeTable

MAX_RANKS = 256   # ranks a result lists (rank, host, device, model); the count is kept whole

_HALF = ("time", "algbw", "busbw")
_CHECK = ("#wrong", "error")
_PER_ITER = ("i_min", "i_max", "i_p99", "i_cv%")
_RANK = re.compile(r"#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^]]*\]\s*(.*)")
_FOOTER = re.compile(r"#?\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)\s*(OK|FAILED)?")
_VERSION = re.compile(r"#?\s*nccl-tests version (\S+)")
_STARTING = re.compile(r"#?\s*Collective test starting:\s*(\S+)")


@dataclass(frozen=True)
class Layout:
    op: bool          # a reduction-op column (redop / op)
    root: bool
    per_iter: bool
    timestamp: bool

    @property
    def width(self) -> int:
        """Tokens in a data row (a timestamp is two: date and time)."""
        half = 4 + (4 if self.per_iter else 0)
        return 3 + self.op + self.root + 2 * half + (2 if self.timestamp else 0)


def parse_layout(tokens: list[str]) -> Layout | None:
    """The layout of a column header, or None if it is not one nccl-tests prints."""
    if tokens[:3] != ["size", "count", "type"]:
        return None
    rest = tokens[3:]
    op = bool(rest) and rest[0] == "redop"
    rest = rest[op:]
    root = bool(rest) and rest[0] == "root"
    rest = rest[root:]
    timestamp = bool(rest) and rest[-1] == "timestamp"
    rest = rest[: len(rest) - timestamp]
    per_iter = len(rest) == 16
    if len(rest) not in (8, 16):
        return None
    half = rest[: len(rest) // 2]
    if rest[len(rest) // 2:] != half or half[0] not in ("time", "cputime") or half[1:3] != ["algbw", "busbw"]:
        return None
    if half[3] not in _CHECK or (per_iter and tuple(half[4:]) != _PER_ITER):
        return None
    return Layout(op, root, per_iter, timestamp)


def _placement(tokens: list[str]) -> dict:
    time_s, algbw, busbw = scaled(tokens[0], -6), scaled(tokens[1], 9), scaled(tokens[2], 9)
    if time_s is None or algbw is None or busbw is None:
        raise ValueError("time, algbw and busbw must be numbers")
    return {"time_seconds": time_s, "algbw_bytes_per_second": algbw, "busbw_bytes_per_second": busbw,
            "check": to_float(tokens[3])}


def parse_row(tokens: list[str], layout: Layout) -> dict:
    if layout.op and not layout.root and len(tokens) == layout.width - 1 and to_float(tokens[3]) is not None:
        tokens = tokens[:3] + [""] + tokens[3:]  # 2018-21 alltoall/all_gather print no op under 'redop'
    if len(tokens) != layout.width:
        raise ValueError(f"{len(tokens)} fields where the header has {layout.width}")
    lead = 3 + layout.op + layout.root
    half = (len(tokens) - lead - (2 if layout.timestamp else 0)) // 2
    return {"size_bytes": int(tokens[0]), "count": int(tokens[1]), "type": tokens[2],
            "redop": tokens[3] if layout.op else None, "root": int(tokens[3 + layout.op]) if layout.root else None,
            "out_of_place": _placement(tokens[lead:lead + half]),
            "in_place": _placement(tokens[lead + half:lead + 2 * half])}


@dataclass
class _State:
    layout: Layout | None = None
    table: SizeTable = field(default_factory=SizeTable)
    peak_busbw: float = float("-inf")
    footer: dict = field(default_factory=dict)
    ranks: list = field(default_factory=list)     # the first MAX_RANKS
    rank_count: int = 0
    hosts: dict = field(default_factory=dict)     # in order of first appearance
    version: str = ""
    test: str = ""


def _scan(lines: Lines) -> _State:
    state = _State()
    for number, line in lines:
        stripped = line.strip()
        tokens = stripped.lstrip("#").split()
        if state.layout is None and "algbw" in tokens and "busbw" in tokens:
            state.layout = parse_layout(tokens)
            if state.layout is None:
                raise lines.fail(number, f"unknown nccl-tests column layout: {stripped!r}")
        elif (m := _RANK.match(stripped)):
            state.rank_count += 1
            state.hosts.setdefault(m[2])
            if len(state.ranks) < MAX_RANKS:
                state.ranks.append({"rank": int(m[1]), "host": m[2], "device": int(m[3]), "model": m[4].strip()})
        elif (m := _FOOTER.match(stripped)):
            state.footer[m[1]] = (m[2], m[3], number)
        elif (m := _VERSION.match(stripped)) or (m := _STARTING.match(stripped)):
            setattr(state, "version" if "version" in stripped else "test", m[1])
        elif state.layout is not None and tokens and tokens[0].isdigit() and not stripped.startswith("#"):
            if state.footer:
                raise lines.fail(number, "a result row after the summary (two runs in one output?)")
            try:
                row = parse_row(tokens, state.layout)
            except ValueError as exc:
                error = lines.fail(number, f"malformed result row ({exc}): {stripped!r}")
                cut = " (truncated?)" if number == lines.finish() else ""
                raise ParseError(lines.source, number, error.reason + cut) from None
            state.table.add(row)
            state.peak_busbw = max(state.peak_busbw, row["out_of_place"]["busbw_bytes_per_second"],
                                   row["in_place"]["busbw_bytes_per_second"])
    return state


def parse_nccl(text: str, source: str = "<nccl-tests output>") -> Parsed:
    """Rows per message size, the printed average bus bandwidth and out-of-bounds count, ranks and hosts."""
    return parse_nccl_lines(Lines.of_text(text, source))


def parse_nccl_lines(lines: Lines) -> Parsed:
    """``parse_nccl`` of an output read line by line: its memory does not grow with the table."""
    source = lines.source
    state = _scan(lines)
    end = lines.finish()
    if state.layout is None:
        raise ParseError(source, end, "no nccl-tests result table (not nccl-tests output?)")
    if not state.table.count:
        raise ParseError(source, end, "no result rows after the column header (truncated?)")
    if "Avg bus bandwidth" not in state.footer:
        raise ParseError(source, end, "output ends before '# Avg bus bandwidth' (truncated?)")
    avg, _, avg_line = state.footer["Avg bus bandwidth"]
    if (avg_busbw := scaled(avg, 9)) is None:
        raise ParseError(source, avg_line, f"average bus bandwidth {avg!r} is not a number")
    return _result(state, avg_busbw, source)


def _result(state: _State, avg_busbw: float, source: str) -> Parsed:
    figures = [Figure("avg_busbw", "bytes_per_second", avg_busbw),
               Figure("peak_busbw", "bytes_per_second", state.peak_busbw)]
    checks = []
    if "Out of bounds values" in state.footer:
        count, verdict, line = state.footer["Out of bounds values"]
        if not (count.isascii() and count.isdigit()):
            raise ParseError(source, line, f"out-of-bounds count {count!r} is not a number")
        wrong = int(count)
        figures.append(Figure("out_of_bounds", "errors", float(wrong)))
        failed = wrong > 0 or verdict == "FAILED"
        checks.append(Check("data", "fail" if failed else "pass", "", f"{wrong} out-of-bounds values"))
    if state.rank_count:
        figures.append(Figure("ranks", "", float(state.rank_count)))
    detail = {"rows": state.table.rows(), "ranks": state.ranks, **state.table.summary()}
    if state.rank_count > len(state.ranks):
        detail["rank_count"] = state.rank_count
    return Parsed("nccl", tuple(figures), tuple(checks), tuple(state.hosts), state.test, state.version, detail)
