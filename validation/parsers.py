"""One parser per ``--kind``; reading a file is kept apart from parsing it. The tools whose output is
a table of lines (nccl-tests, perftest, gpu-burn) are parsed as the file is read, a line at a time."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from lockstep.validation.dcgm import parse_dcgm_diag
from lockstep.validation.fio import parse_fio
from lockstep.validation.gpuburn import parse_gpu_burn, parse_gpu_burn_lines
from lockstep.validation.lines import Lines
from lockstep.validation.model import Parsed, ParseError
from lockstep.validation.nccl import parse_nccl, parse_nccl_lines
from lockstep.validation.perftest import parse_perftest, parse_perftest_lines

PARSERS: dict[str, Callable[[str, str], Parsed]] = {
    "nccl": parse_nccl, "perftest": parse_perftest, "dcgm-diag": parse_dcgm_diag, "fio": parse_fio,
    "gpu-burn": parse_gpu_burn,
}
LINE_PARSERS: dict[str, Callable[[Lines], Parsed]] = {
    "nccl": parse_nccl_lines, "perftest": parse_perftest_lines, "gpu-burn": parse_gpu_burn_lines,
}
MAX_BYTES = 64 << 20   # a nccl-tests run with NCCL_DEBUG=INFO on 1,000 ranks is a few MB


def parse(kind: str, text: str, source: str) -> Parsed:
    try:
        parser = PARSERS[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(PARSERS)})") from None
    return parser(text, source)


def read_output(path: Path) -> str:
    """A tool's saved output as text (bytes that are not UTF-8 replaced: a parser then names the line)."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ParseError(str(path), 1, f"larger than {MAX_BYTES >> 20} MiB: not one tool run's output")
    return data.decode(errors="replace")


def parse_file(kind: str, path: Path) -> Parsed:
    if kind in LINE_PARSERS:
        with open(path, "rb") as f:
            return LINE_PARSERS[kind](Lines.of_file(f, str(path), MAX_BYTES))
    return parse(kind, read_output(path), str(path))
