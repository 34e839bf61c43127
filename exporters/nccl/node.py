"""What ties a RAS answer to this node: the addresses NCCL may know it by, and the job a process runs in.

RAS names a rank's node by the IP address of its RAS socket (``ncclSocketToHost``: ``inet_ntop``, no name
lookup), on the interface NCCL bootstraps over. So the node's own addresses are read from the kernel:
``<procfs>/net/fib_trie`` (IPv4: each ``/32 host LOCAL`` entry is an address of this host) and
``<procfs>/net/if_inet6`` (IPv6: one address per line, 32 hex digits first).

A process's Slurm job is in ``<procfs>/<pid>/cgroup``: Slurm's cgroup v1 plugin puts a job's tasks under
``/slurm/uid_<uid>/job_<id>/step_<step>/...``, its cgroup v2 plugin under
``/system.slice/<node>_slurmstepd.scope/job_<id>/step_<step>/...`` (the node prefix only with several slurmd
per host).
"""
from __future__ import annotations

import functools
import ipaddress
import os
import re
from pathlib import Path

from lockstep.exporters.readfile import read_text

_FIB_ADDRESS = re.compile(r"^\s*\|--\s+(\d{1,3}(?:\.\d{1,3}){3})\s*$")
_FIB_LOCAL = re.compile(r"^\s*/32 host LOCAL\s*$")
_SLURM_JOB = re.compile(r"(?:^|/)(?:slurm(?:/uid_\d+)?|[^/]*slurmstepd\.scope)/job_(\d+)(?:/|$)")


def parse_fib_trie(text: str) -> set[str]:
    """IPv4 addresses of this host: an address line followed (possibly after other prefixes) by ``/32 host
    LOCAL``."""
    found, last = set(), None
    for line in text.splitlines():
        if m := _FIB_ADDRESS.match(line):
            last = m.group(1)
        elif last is not None and _FIB_LOCAL.match(line):
            found.add(last)
    return found


def parse_if_inet6(text: str) -> set[str]:
    found = set()
    for line in text.splitlines():
        fields = line.split()
        if fields and len(fields[0]) == 32:
            try:
                found.add(str(ipaddress.IPv6Address(int(fields[0], 16))))
            except ValueError:
                continue
    return found


class LocalAddresses:
    """This host's IPv4 and IPv6 addresses (empty where procfs does not say), normalised: the files are read
    on every call and parsed again only when their text changed (each poll would parse the same table)."""

    def __init__(self, procfs: Path) -> None:
        self.paths = tuple((os.path.join(procfs, "net", name), parse)
                           for name, parse in (("fib_trie", parse_fib_trie), ("if_inet6", parse_if_inet6)))
        self._parsed: dict[str, tuple[str, frozenset[str]]] = {}   # path → (its last text, its addresses)

    def __call__(self) -> set[str]:
        found: set[str] = set()
        for path, parse in self.paths:
            try:
                text = read_text(path)
            except OSError:
                continue
            last = self._parsed.get(path)
            if last is None or last[0] != text:
                last = self._parsed[path] = (text, frozenset(normal_address(a) for a in parse(text)))
            found |= last[1]
        return found


@functools.lru_cache(maxsize=4096)
def normal_address(value: str) -> str:
    """An IP address as ``inet_ntop`` writes it (so that two spellings of one IPv6 address compare equal).
    Cached: a poll normalises every rank's host, and a job's hosts are few."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def slurm_job_of_cgroup(text: str) -> str:
    """The Slurm job id in a ``/proc/<pid>/cgroup`` text, "" when the process is in none."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if m := _SLURM_JOB.search(path):
            return m.group(1)
    return ""


def slurm_job_of_pid(procfs: Path, pid: int) -> str:
    """The Slurm job of process ``pid``, "" when unknown (not visible from here, gone, not in a job)."""
    if pid <= 0:
        return ""
    try:
        return slurm_job_of_cgroup(read_text(os.path.join(procfs, str(pid), "cgroup")))
    except OSError:
        return ""
