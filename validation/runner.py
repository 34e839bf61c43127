"""Run a validation tool with a hard time limit that holds even when the tool hangs.

The tool runs in a session (process group) of its own: at the limit the whole group gets SIGTERM and,
``KILL_GRACE_S`` later, SIGKILL, so what it started (mpirun's ranks, nvvs under dcgmi, a shell's
children) goes with it. After a normal exit the group is killed too: nothing it left in the background
outlives the run. Output is read with a bound as well: a process that escaped the group (its own
``setsid``) and holds the pipe open cannot keep the caller waiting.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Sequence

KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    returncode: int | None      # None when killed at the limit
    stdout: str
    stderr: str
    started: float              # Unix time
    duration_seconds: float
    timed_out: bool


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def _drain(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Something outside the group still holds the pipes: stop reading, keep what came.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=timeout)
        return "", ""


def run_bounded(argv: Sequence[str], timeout: float, grace: float = KILL_GRACE_S) -> Outcome:
    """Run ``argv``; at ``timeout`` seconds kill its process group. Raises OSError if it cannot start."""
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    started, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            stdout, stderr = _drain(proc, grace)
    _signal_group(proc.pid, signal.SIGKILL)   # whatever the tool left running in its group
    duration = time.monotonic() - t0
    return Outcome(tuple(argv), None if timed_out else proc.returncode, stdout or "", stderr or "", started,
                   duration, timed_out)
