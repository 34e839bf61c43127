"""Where each rank ran: global rank → node and GPU, named as lockstep's metrics name them (``node`` as
the node agent's ``node`` label, ``gpu`` the device index as in ``lockstep_gpu_job_info`` and
``lockstep_rank_step_seconds``).

A Flight Recorder dump carries neither: its file name gives the rank, and ``pg_config`` only the ranks
of each process group. So the placement comes from the operator, in one of two forms:

- a ranks file, CSV with a header naming (at least) ``rank``, ``node`` and ``gpu``, one row per rank;
  a job can write it at start (``RANK``, ``socket.gethostname()``, ``LOCAL_RANK``);
- the job's node list in launch order and its GPUs per node, for the block placement torchrun and
  Slurm use by default: rank r on node ``r // gpus_per_node``, GPU ``r % gpus_per_node``
  (Slurm: ``scontrol show hostnames $SLURM_JOB_NODELIST``).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Sequence

from lockstep.exporters.toolkit.configfile import ConfigError

MAX_FILE_BYTES = 16 << 20
COLUMNS = ("rank", "node", "gpu")


@dataclass(frozen=True, slots=True)
class Place:
    node: str
    gpu: str


def from_csv(path: str) -> dict[int, Place]:
    """The ranks file → ``{rank: Place}``; ConfigError naming FILE:LINE for a bad row or a rank given twice."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(path, None, "", f"larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(path, None, "", "not UTF-8 text") from None
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader, [])]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ConfigError(path, 1, "header", f"want columns {','.join(COLUMNS)}, missing {','.join(missing)}")
    index = {c: header.index(c) for c in COLUMNS}
    out: dict[int, Place] = {}
    for line, row in enumerate(reader, start=2):
        if not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise ConfigError(path, line, "", f"want {len(header)} columns, got {len(row)}")
        rank_text, node, gpu = (row[index[c]].strip() for c in COLUMNS)
        if not rank_text.isascii() or not rank_text.isdigit() or len(rank_text) > 9:
            raise ConfigError(path, line, "rank", f"not a rank: {rank_text!r:.40}")
        rank = int(rank_text)
        if not node:
            raise ConfigError(path, line, "node", "empty")
        if rank in out:
            raise ConfigError(path, line, "rank", f"rank {rank} given twice")
        out[rank] = Place(node, gpu)
    return out


def from_nodes(nodes: Sequence[str], gpus_per_node: int) -> dict[int, Place]:
    """Block placement over ``nodes`` in launch order."""
    if gpus_per_node < 1:
        raise ValueError("--gpus-per-node must be at least 1")
    return {i * gpus_per_node + g: Place(node, str(g)) for i, node in enumerate(nodes) for g in range(gpus_per_node)}


def parse_nodes(value: str) -> list[str]:
    """``node01,node02`` or ``@FILE`` (one name a line, as ``scontrol show hostnames`` prints them)."""
    if value.startswith("@"):
        path = value[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_FILE_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(path, None, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        names = [line.strip() for line in text.splitlines()]
    else:
        names = [name.strip() for name in value.split(",")]
    names = [n for n in names if n]
    if not names:
        raise ValueError("--nodes: no node names")
    return names
