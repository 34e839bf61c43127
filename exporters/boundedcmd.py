"""A command run once per scrape (``lctl get_param``, ``nvme smart-log``, ``mmpmon``) whose wait is bounded even
when the command hangs in the kernel and cannot be killed."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess

# A killed process exits within milliseconds unless it sleeps uninterruptibly in the kernel (lctl
# in D state while a Lustre server is down): past this, the scrape stops waiting for it.
KILL_GRACE_S = 0.5


class BoundedCommand:
    """Runs a command so that the scrape is bounded even when the command cannot be killed.

    ``subprocess.run(timeout=)`` kills the child on timeout and then waits for it without limit: an
    lctl in D state never exits, and the scrape, which holds one lock for every collector, would
    hang with it. Here a killed run still there after ``KILL_GRACE_S`` is kept and checked without
    blocking on later scrapes; no new run starts until it is over (one stuck lctl, not one more
    per scrape)."""

    def __init__(self, command: tuple[str, ...], timeout: float, stdin: str | None = None) -> None:
        """``stdin``: text written to the command's standard input (mmpmon reads its requests there)."""
        self.command, self.timeout, self.stdin = command, timeout, stdin
        self._stuck: subprocess.Popen[str] | None = None

    def run(self) -> str:
        name = shlex.join(self.command)
        if self._stuck is not None:
            if not _over(self._stuck):
                raise RuntimeError(f"{name} (pid {self._stuck.pid}) killed after a timeout has not exited "
                                   "yet; not starting another")
            self._stuck = None
        # A session of its own: the kill reaches what a wrapper (sudo, sh -c) started as well.
        proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL if self.stdin is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(self.stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                proc.communicate(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                self._stuck = proc
                raise RuntimeError(f"{name} timed out after {self.timeout:g} s and had not exited "
                                   f"{KILL_GRACE_S:g} s after SIGKILL (pid {proc.pid})") from None
            raise RuntimeError(f"{name} timed out after {self.timeout:g} s (killed)") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}: {stderr.strip()[:200]}")
        return stdout


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # exited just after the timeout, or not ours to signal: the grace wait tells


def _over(proc: subprocess.Popen[str]) -> bool:
    """Whether a killed run is over, without blocking: the child reaped and both output pipes at
    end of file, i.e. closed by every process holding them (an lctl stuck under a wrapper script
    outlives the wrapper and keeps the pipe open)."""
    if proc.poll() is None:
        return False
    for pipe in (proc.stdout, proc.stderr):
        if pipe is None or pipe.closed:
            continue
        os.set_blocking(pipe.fileno(), False)
        try:
            # One read, not a loop: a holder still writing must not keep the scrape here. Output
            # left over delays the end by one scrape (a pipe holds 64 KiB, one read's worth).
            if os.read(pipe.fileno(), 65536):
                return False
        except BlockingIOError:
            return False  # still open at the other end
        pipe.close()
    return True
