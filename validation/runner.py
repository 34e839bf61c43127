"""Run a validation tool with a hard time limit that holds even when the tool hangs.

The tool runs in a session (process group) of its own: at the limit the whole group gets SIGTERM and,
``grace`` seconds later, SIGKILL, so what it started (mpirun's ranks, nvvs under dcgmi, a shell's
children) goes with it. After a normal exit the group is killed too: nothing it left in the background
outlives the run. Output goes to files, not pipes: a process holding the output open (one that escaped
the group with its own ``setsid``) cannot keep the caller waiting, and neither can a tool stuck in the
kernel (DCGM hung in the driver is in D state, where even SIGKILL waits): the caller returns after the
grace period and reports it.

A tool's output is untrusted and may be any length (NCCL_DEBUG=TRACE on a thousand ranks, a tool
looping on an error): it is read whole only up to ``max_bytes`` (``parsers.MAX_BYTES``, 64 MiB, the bound ``lockstep
validate ingest`` holds a saved output to). Past that, only its head and its tail are kept (``HEAD_BYTES``,
``TAIL_BYTES``): the head says what ran (the tool's banner, version, hosts, the first rows), the tail
how it ended (the summary and the last error a tool prints). Neither is parseable on its own; the
caller reports the output as too large (``Captured.truncated``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Sequence

from lockstep.validation.parsers import MAX_BYTES

KILL_GRACE_S = 5.0
HEAD_BYTES = 64 << 10
TAIL_BYTES = 896 << 10        # head and tail together fit the 1 MiB the results directory keeps (store.RAW_TAIL_BYTES)


@dataclass(frozen=True)
class Captured:
    """What was kept of one output stream: all of it, or past the bound its head and tail."""
    text: str
    size: int                   # bytes the tool wrote
    truncated: bool = False


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    returncode: int | None      # None when killed at the limit
    captured_stdout: Captured
    captured_stderr: Captured
    started: float              # Unix time
    duration_seconds: float
    timed_out: bool
    stuck: bool = False         # still there after SIGKILL (uninterruptible sleep in the kernel)

    @property
    def stdout(self) -> str:
        return self.captured_stdout.text

    @property
    def stderr(self) -> str:
        return self.captured_stderr.text


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


def _captured(f: IO[bytes], max_bytes: int) -> Captured:
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size <= max_bytes:
        return Captured(f.read(max_bytes).decode(errors="replace"), size)
    head = f.read(HEAD_BYTES)
    f.seek(max(size - TAIL_BYTES, HEAD_BYTES))
    tail = f.read(TAIL_BYTES)
    left_out = size - len(head) - len(tail)
    return Captured(f"{head.decode(errors='replace')}\n[... {left_out} bytes not kept ...]\n"
                    f"{tail.decode(errors='replace')}", size, truncated=True)


def run_bounded(argv: Sequence[str], timeout: float, grace: float = KILL_GRACE_S,
                max_bytes: int = MAX_BYTES) -> Outcome:
    """Run ``argv``; at ``timeout`` seconds stop its process group. Raises OSError if it cannot start.
    Each output stream is kept whole up to ``max_bytes``, past that its head and tail only."""
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
        return Outcome(tuple(argv), None if timed_out else proc.returncode, _captured(out, max_bytes),
                       _captured(err, max_bytes), started, duration, timed_out, stuck)
