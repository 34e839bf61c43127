"""The per-rank step feed: what a training process sends the node agent's ``steps`` collector, and how it names
itself. A format contract, like ``simlayout``: the sender (``lockstep.training``, the simulator) and the reader
(``lockstep.exporters.collectors.steps``) import it from the catalog, the one layer both may import.

Transport: one UNIX datagram per report to the agent's socket (``--steps.socket``, default ``DEFAULT_SOCKET``;
``LOCKSTEP_STEPS_SOCKET`` in the training process). A report is cumulative (steps and seconds since the process
started): a datagram lost because the agent was away, slow or restarting costs nothing but freshness, the next one
carries the totals.

A report is one JSON object of at most ``MAX_DATAGRAM`` bytes::

    {"v": 1, "job": "4242", "rank": "17", "local_rank": "1", "gpu": "GPU-8f3c...", "pid": 12345,
     "session": "9c1e0f2a7d3b4e51", "steps": 1200, "step": 1199, "end": 1767225600.25, "seconds": 1803.5}

``job``, ``rank``, ``local_rank``, ``gpu``: what the process knows of itself (``identity``), "" where nothing says;
``session``: random per process (a reused pid is another sender); ``steps``: step ends since the process started;
``step``: the last step number the job gave (-1: none given); ``end``: Unix time of the last step end;
``seconds``: the sum of the times between consecutive step ends (the first one adds none).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Mapping

VERSION = 1
DEFAULT_SOCKET = "/run/lockstep/steps.sock"
MAX_DATAGRAM = 1024
MAX_TEXT = 128          # job, rank, local rank and gpu: longer is not a report
DEFAULT_INTERVAL_S = 1.0

ENV_SOCKET = "LOCKSTEP_STEPS_SOCKET"     # where the agent listens (default DEFAULT_SOCKET)
ENV_ENABLE = "LOCKSTEP_STEPS"            # "0": step_end() does nothing
ENV_INTERVAL = "LOCKSTEP_STEPS_INTERVAL"  # seconds between reports (default 1)
ENV_JOB = "LOCKSTEP_JOB_ID"              # the job, where the scheduler's variables don't say
ENV_GPU = "LOCKSTEP_GPU"                 # the GPU (index or UUID), where CUDA_VISIBLE_DEVICES doesn't say
# First set wins. torchrun sets RANK and LOCAL_RANK; srun SLURM_PROCID and SLURM_LOCALID; Open MPI and MPICH/PMI
# their own; Kubernetes training operators (PyTorchJob, JobSet with torchrun) set RANK through torchrun.
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
JOB_VARS = (ENV_JOB, "SLURM_JOB_ID")


@dataclass(frozen=True, slots=True)
class Identity:
    job: str
    rank: str
    local_rank: str
    gpu: str


@dataclass(frozen=True, slots=True)
class Report:
    identity: Identity
    pid: int
    session: str
    steps: int
    step: int
    end: float
    seconds: float


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value[:MAX_TEXT]
    return ""


def identity(env: Mapping[str, str]) -> Identity:
    """Who a training process is, from its environment. The GPU: ``LOCKSTEP_GPU``; else the process's entry of
    ``CUDA_VISIBLE_DEVICES`` (the only one, or the ``LOCAL_RANK``-th as torchrun's one-GPU-per-process convention
    uses them: an index or a ``GPU-``/``MIG-`` UUID); else the local rank. The agent takes an index for the node's
    NVML index: where cgroups renumber devices (Slurm's ConstrainDevices), give UUIDs or ``LOCKSTEP_GPU``."""
    rank, local = _first(env, RANK_VARS), _first(env, LOCAL_RANK_VARS)
    gpu = env.get(ENV_GPU, "").strip()
    if not gpu:
        visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        if len(visible) == 1:
            gpu = visible[0]
        elif visible and local.isdigit() and int(local) < len(visible):
            gpu = visible[int(local)]
        elif not visible and "CUDA_VISIBLE_DEVICES" not in env:
            gpu = local
    return Identity(_first(env, JOB_VARS), rank, local, gpu[:MAX_TEXT])


def encode(report: Report) -> bytes:
    i = report.identity
    return json.dumps({"v": VERSION, "job": i.job, "rank": i.rank, "local_rank": i.local_rank, "gpu": i.gpu,
                       "pid": report.pid, "session": report.session, "steps": report.steps, "step": report.step,
                       "end": round(report.end, 6), "seconds": round(report.seconds, 6)},
                      separators=(",", ":")).encode()


def _text(doc: dict, key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > MAX_TEXT or not value.isprintable():
        raise ValueError(f"{key}: not a short printable string")
    return value


def _int(doc: dict, key: str, low: int) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        raise ValueError(f"{key}: not an integer >= {low}")
    return value


def _seconds(doc: dict, key: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: not a finite number >= 0")
    return float(value)


def decode(data: bytes) -> Report:
    """A datagram's report; ValueError for anything that is not one (too long, not JSON, a field missing, of the
    wrong type or out of range, another version)."""
    if len(data) > MAX_DATAGRAM:
        raise ValueError(f"datagram of {len(data)} bytes, at most {MAX_DATAGRAM}")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        raise ValueError(f"not a version {VERSION} report")
    session = _text(doc, "session")
    if not session:
        raise ValueError("session: empty")
    return Report(Identity(_text(doc, "job"), _text(doc, "rank"), _text(doc, "local_rank"), _text(doc, "gpu")),
                  _int(doc, "pid", 0), session, _int(doc, "steps", 0), _int(doc, "step", -1), _seconds(doc, "end"),
                  _seconds(doc, "seconds"))
