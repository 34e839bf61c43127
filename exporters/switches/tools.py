"""Runs one infiniband-diags command with a deadline. A tool that hangs is killed at its deadline (its
whole process group, so a wrapper script's children go too) and reported, never waited for: one that
outlives the kill (a process escaped from the group still holding the output pipes) is left behind
after ``KILL_GRACE_S``."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

MAX_OUTPUT = 64 * 1024 * 1024   # the text kept of a runaway tool's output (it is read whole first)
# A killed tool exits within milliseconds unless it sleeps in the kernel or left a process outside its group
# (a daemonising wrapper) holding its output pipes: past this, the sweep stops waiting for it.
KILL_GRACE_S = 0.5


@dataclass(frozen=True, slots=True)
class ToolResult:
    argv: tuple[str, ...]
    returncode: int | None   # None: killed at the deadline, or could not start
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    start_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        if self.start_error:
            return f"could not start {self.argv[0]}: {self.start_error}"
        if self.timed_out:
            return f"{self.argv[0]} timed out after {self.duration_s:.1f}s"
        last = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        return f"{self.argv[0]} exited {self.returncode}: {last[0][:200]}"


def run(argv: tuple[str, ...], timeout_s: float) -> ToolResult:
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        return ToolResult(argv, None, "", "", time.monotonic() - started, start_error=exc.strerror or str(exc))
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            for pipe in (proc.stdout, proc.stderr):   # whatever still holds them writes into a closed pipe
                if pipe is not None:
                    pipe.close()
            proc.poll()   # reaped now if it did exit; otherwise subprocess reaps it on a later Popen
        return ToolResult(argv, None, "", "", time.monotonic() - started, timed_out=True)
    decode = lambda b: b[:MAX_OUTPUT].decode("utf-8", "replace")  # noqa: E731 - two uses, one line
    return ToolResult(argv, proc.returncode, decode(out), decode(err), time.monotonic() - started)
