"""A real lockstep command run as a process, held to its deployed memory limit and to deadlines: the
hostile-input tests start the service as an operator would and feed it the input.

The memory limit is read from the deployment itself (the Helm chart's ``resources.limits.memory``),
so a service is held to what it is given in production; a command the chart does not deploy (the
quarantine receiver, ``lockstep alerts build``) is held to the smallest limit the chart gives any
lockstep service. While the process runs, its peak resident memory (VmHWM: a high-water mark, so a
sample taken after a spike still sees it) is read from /proc every few milliseconds, and past the
limit the process is killed at once: a regression fails its test instead of taking the memory of the
machine running the suite. (The kernel's ru_maxrss of a child is no use here: it starts from the
size of the forking test process.) Time is bounded by deadlines polled for, never by a measured
duration."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import yaml

from tests.helpers.paths import REPO

VALUES = REPO / "deploy/helm/lockstep/values.yaml"
_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "": 1}


def helm_memory_limit(component: str) -> int:
    """``<component>.resources.limits.memory`` of the chart's values, in bytes (``256Mi``)."""
    text = yaml.safe_load(VALUES.read_text())[component]["resources"]["limits"]["memory"]
    number, unit = re.fullmatch(r"(\d+)([KMG]i?|)", str(text)).groups()
    return int(number) * _UNITS[unit]


def smallest_helm_memory_limit() -> int:
    values = yaml.safe_load(VALUES.read_text())
    return min(helm_memory_limit(k) for k, v in values.items()
               if isinstance(v, dict) and "memory" in v.get("resources", {}).get("limits", {}))


def _status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Bounded:
    """``argv`` started with its output in ``log``; ``check_memory`` at every poll of ``until``."""

    def __init__(self, argv: Sequence[str], limit_bytes: int, log: Path, env: dict[str, str] | None = None,
                 cwd: Path = REPO) -> None:
        self.limit, self.log_path = limit_bytes, log
        self.peak_bytes = 0
        self.returncode: int | None = None
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*argv], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=cwd)

    @classmethod
    def lockstep(cls, args: Sequence[str], limit_bytes: int, log: Path, **options) -> "Bounded":
        return cls([sys.executable, "-m", "lockstep", *args], limit_bytes, log, **options)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_memory(self) -> None:
        """Read the peak resident memory so far (VmHWM); past the limit, kill the process and fail."""
        if self.returncode is not None:
            return
        self.peak_bytes = max(self.peak_bytes, _status_kib(self.proc.pid, "VmHWM") * 1024)
        if self.peak_bytes > self.limit:
            self.proc.kill()
            self._reap(block=True)
            command = " ".join(map(str, self.proc.args[1:5]))
            raise AssertionError(f"{command}: resident memory reached {self.peak_bytes >> 20} MiB, past the "
                                 f"{self.limit >> 20} MiB limit; killed\n{self.log()[-3000:]}")

    def _reap(self, block: bool = False) -> bool:
        """Collect the exit status, once the process has exited."""
        if self.returncode is not None:
            return True
        pid, status = os.waitpid(self.proc.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return False
        self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)
        return True

    def until(self, check: Callable[[], bool], deadline_s: float, what: str, every: float = 0.02) -> None:
        """Poll ``check`` until it holds, the memory limit checked at every poll; AssertionError
        naming ``what`` if ``deadline_s`` passes first or the process exits."""
        deadline = time.monotonic() + deadline_s
        while True:
            self.check_memory()
            if check():
                return
            if self._reap():
                raise AssertionError(f"exited with {self.returncode} while waiting for {what}\n"
                                     f"{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {deadline_s:g} s: {what}\n{self.log()[-3000:]}")
            time.sleep(every)

    def exited(self, deadline_s: float) -> int:
        """The exit code, once the process has exited within ``deadline_s`` (memory checked meanwhile)."""
        deadline = time.monotonic() + deadline_s
        while True:
            self.check_memory()   # before reaping: the last sample of a process about to exit
            if self._reap():
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {deadline_s:g} s\n{self.log()[-3000:]}")
            time.sleep(0.01)
        assert self.peak_bytes <= self.limit, f"peak resident memory {self.peak_bytes >> 20} MiB"
        return self.returncode

    def terminate(self) -> None:
        if self.returncode is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """Whatever happened: the process is gone after this (SIGKILL if SIGTERM is not enough)."""
        if self.returncode is None:
            self.terminate()
            try:
                self.exited(10)
            except AssertionError:
                self.proc.kill()
                self._reap(block=True)
