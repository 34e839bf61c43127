"""Test plumbing for callers that connect and stall: a real lockstep service started on 127.0.0.1:0
with its log in a file, and raw client sockets that stay silent, trickle a request header, or send
a whole request."""
from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.paths import REPO

HEADER = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"   # a request whose headers never end


class Process:
    """``lockstep ARGS... --web.listen-address=127.0.0.1:0``, its stderr in ``log``; ``nofile`` (soft,
    hard) sets its open-files limits, as a systemd unit's ``LimitNOFILE`` would."""

    def __init__(self, args: list[str], log: Path, nofile: tuple[int, int] | None = None,
                 env: dict | None = None) -> None:
        def limits() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "lockstep", *args, "--web.listen-address=127.0.0.1:0"],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                                         env=env, preexec_fn=limits)
        deadline = time.monotonic() + 60
        while not (match := re.search(r"msg=listening address=http://127\.0\.0\.1:(\d+)", self.text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"lockstep {args[0]} did not start:\n{self.text()}")
            time.sleep(0.05)
        self.port = int(match.group(1))

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def status(self, field: str) -> int:
        """A kB figure of /proc/<pid>/status (VmHWM: the peak resident set so far)."""
        return int(re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{self.proc.pid}/status").read_text()).group(1))

    def soft_nofile(self) -> int:
        line = next(line for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines()
                    if line.startswith("Max open files"))
        return int(line.split()[3])

    def sockets(self) -> int:
        count = 0
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                count += os.readlink(f"/proc/{self.proc.pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass
        return count

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def connect(port: int, send: bytes = b"", timeout: float = 5.0) -> socket.socket | None:
    """A connection to the service (None if it could not be made in ``timeout``), after sending ``send``."""
    sock = socket.socket()
    sock.settimeout(timeout)
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(send)
    except OSError:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the service has closed the connection (end of file or reset); any bytes it sent
    (an answer) are read and dropped."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def until(condition, timeout: float, what: str, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(every)


def get(port: int, path: str = "/metrics", timeout: float = 10.0) -> tuple[int, float]:
    """One request on a new connection: (status, seconds to the whole answer)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), time.monotonic() - started


def raise_own_open_files(want: int) -> None:
    """This test process holds many client sockets: lift its soft limit (never past the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
