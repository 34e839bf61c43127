"""Default test names from a tool's command line, and node lists as Slurm writes them."""
from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

_HOSTLIST = re.compile(r"^([^\[\],]*)\[([0-9,\-]+)\]([^\[\],]*)$")


def _after(argv: Sequence[str], *flags: str) -> str:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if flag.startswith("--") and arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return ""


def name_from_argv(kind: str, argv: Sequence[str]) -> str:
    """``all_reduce_perf`` (nccl, found behind srun/mpirun), ``ib_write_bw/mlx5_0`` (perftest -d),
    ``diag-r3`` (dcgmi diag -r 3), else the kind."""
    names = [os.path.basename(a) for a in argv]
    if kind == "nccl":
        return next((n for n in names if n.endswith("_perf")), kind)
    if kind == "perftest":
        program = next((n for n in names if re.fullmatch(r"ib_\w+_(bw|lat)", n)), "")
        device = _after(argv, "-d", "--ib-dev")
        return f"{program}/{device}" if program and device else program or kind
    if kind == "dcgm-diag":
        level = _after(argv, "-r", "--run")
        return f"diag-r{level}" if level else "diag"
    return kind


def expand_hostlist(text: str) -> list[str]:
    """``node[01-03,07],gpu5`` -> node01 node02 node03 node07 gpu5 (one bracket group per name)."""
    nodes: list[str] = []
    for part in re.split(r",(?![^\[]*\])", text):
        part = part.strip()
        if not part:
            continue
        m = _HOSTLIST.match(part)
        if "[" not in part:
            nodes.append(part)
        elif m is None:
            raise ValueError(f"cannot expand host list {part!r} (one [a-b,c] group per name)")
        else:
            nodes += [f"{m[1]}{n}{m[3]}" for n in _ranges(m[2])]
    return nodes


def _ranges(spec: str) -> Iterable[str]:
    for item in spec.split(","):
        low, _, high = item.partition("-")
        if not high:
            yield low
            continue
        if int(high) < int(low):
            raise ValueError(f"host list range {item!r} runs backwards")
        width = len(low)
        yield from (str(n).zfill(width) for n in range(int(low), int(high) + 1))
