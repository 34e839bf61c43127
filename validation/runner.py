"""Run a validation tool with a hard time limit that holds even when the tool hangs.

The tool runs in a session (process group) of its own: at the limit the whole group gets SIGTERM and,
``grace`` seconds later, SIGKILL, so what it started (mpirun's ranks, nvvs under dcgmi, a shell's
children) goes with it. After a normal exit the group is killed too: nothing it left in the background
outlives the run. Output goes to files, not pipes: a process holding the output open (one that escaped
the group with its own ``setsid``) cannot keep the caller waiting, and neither can a tool stuck in the
kernel (DCGM hung in the driver is in D state, where even SIGKILL waits): the caller returns after the
grace period and reports it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Sequence

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
    stuck: bool = False         # still there after SIGKILL (uninterruptible sleep in the kernel)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def _stop(proc: subprocess.Popen, grace: float) -> bool:
    """SIGTERM the group, SIGKILL it after ``grace``; False if the tool is still there after both."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
        return True
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=grace)
        return True
    except subprocess.TimeoutExpired:
        return False


def _text(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode(errors="replace")


def run_bounded(argv: Sequence[str], timeout: float, grace: float = KILL_GRACE_S) -> Outcome:
    """Run ``argv``; at ``timeout`` seconds stop its process group. Raises OSError if it cannot start."""
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started, t0 = time.time(), time.monotonic()
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        timed_out, stuck = False, False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stuck = not _stop(proc, grace)
        duration = time.monotonic() - t0
        _signal_group(proc.pid, signal.SIGKILL)   # whatever the tool left running in its group
        return Outcome(tuple(argv), None if timed_out else proc.returncode, _text(out), _text(err), started,
                       duration, timed_out, stuck)
