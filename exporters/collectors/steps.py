"""``steps`` (off by default): each training rank's step ends on this node, as its process reports them through
the step feed (``lockstep.training.step_end()``; format: ``lockstep.exporters.catalog.stepfeed``; metrics:
``lockstep.exporters.catalog.pace``).

The agent binds a UNIX datagram socket (``--steps.socket``, mode ``--steps.socket-mode``: training processes run
as their users) and a daemon thread reads it; a scrape serves what the reports said, never waiting on a sender. A
report is cumulative, so a lost one costs nothing but freshness. Each process is held until ``--steps.ttl`` passes
without a report from it (a hung or dead rank keeps its last step end for that long); at most
``--steps.max-senders`` processes, reports of more are refused and counted. A rank's series sum the processes
that held it, a restarted one continuing the count.

A report names its GPU as the process saw it (an index, or a ``GPU-``/``MIG-`` UUID): the rank's ``gpu`` and
``job_id`` come from the node's job mapping (the ``jobs`` collector's sources and flags, Slurm or Kubernetes), the
job the process named where the mapping has none. Anything a local process sends is believed as far as its
identity goes (the socket is the trust boundary): bounded in size and count, it can add series, never break a
scrape.
"""
from __future__ import annotations

import argparse
import logging
import os
import socket
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lockstep.exporters.catalog import pace as m
from lockstep.exporters.catalog import stepfeed
from lockstep.exporters.collectors.jobs import LazyJobs
from lockstep.exporters.config import number_flag
from lockstep.exporters.jobs.placement import Placement, Placements
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig

log = logging.getLogger("lockstep.collector.steps")
RECEIVE_BUFFER = 1 << 20


@dataclass(frozen=True)
class StepsOptions:
    socket: Path = Path(stepfeed.DEFAULT_SOCKET)
    socket_mode: int = 0o666
    ttl: float = 600.0
    max_senders: int = 512

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "steps.socket", metavar="PATH",
                 help=f"the UNIX datagram socket training processes report to (LOCKSTEP_STEPS_SOCKET in the job; "
                      f"default {stepfeed.DEFAULT_SOCKET}; its directory is created)")
        add_flag(group, "steps.socket-mode", metavar="OCTAL",
                 help="permissions of the socket: who may report (default 0666: every local user's jobs)")
        add_flag(group, "steps.ttl", type=float, metavar="SECONDS",
                 help="a process that has not reported for this long is dropped (default 600)")
        add_flag(group, "steps.max-senders", type=int, metavar="N",
                 help="processes held at once; reports of more are refused (default 512)")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "StepsOptions":
        mode = str(config.flag("steps.socket-mode", "0666"))
        try:
            socket_mode = int(mode, 8)
        except ValueError:
            raise ValueError(f"--steps.socket-mode: {mode!r} is not an octal mode") from None
        if not 0 <= socket_mode <= 0o777:
            raise ValueError(f"--steps.socket-mode: {mode!r} is not a permission mode")
        ttl = number_flag(config, "steps.ttl", 600.0, above=0)
        senders = number_flag(config, "steps.max-senders", 512, at_least=1, integer=True)
        return cls(Path(config.flag("steps.socket", stepfeed.DEFAULT_SOCKET)), socket_mode, ttl, senders)


@dataclass
class _Sender:
    report: stepfeed.Report
    seen: float          # monotonic time of its last report


class StepTable:
    """The processes' last reports, and the counts of those dropped (held for their rank); thread-safe."""

    def __init__(self, max_senders: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_senders, self.ttl, self.clock = max_senders, ttl, clock
        self._senders: dict[tuple[int, str], _Sender] = {}
        # the counts of processes dropped, held while another process reports for the same rank
        self._retired: dict[stepfeed.Identity, tuple[int, float, float]] = {}   # steps, seconds, last seen
        self.results = Counter({r: 0 for r in m.DATAGRAM_RESULTS})
        self._lock = threading.Lock()

    def receive(self, data: bytes) -> str:
        try:
            report = stepfeed.decode(data)
        except ValueError as exc:
            once(log, logging.INFO, "malformed", "step feed datagram dropped: %s", exc)
            return self._count("malformed")
        key = (report.pid, report.session)
        with self._lock:
            if key not in self._senders and len(self._senders) >= self.max_senders:
                self._expire()
                if len(self._senders) >= self.max_senders:
                    self.results["refused"] += 1
                    return "refused"
            held = self._senders.get(key)
            if held is None or report.steps >= held.report.steps:   # a datagram overtaken by a later one: kept
                self._senders[key] = _Sender(report, self.clock())
            self.results["accepted"] += 1
        return "accepted"

    def _count(self, result: str) -> str:
        with self._lock:
            self.results[result] += 1
        return result

    def _expire(self) -> None:
        now = self.clock()
        for key, sender in list(self._senders.items()):
            if now - sender.seen > self.ttl:
                del self._senders[key]
                steps, seconds, seen = self._retired.get(sender.report.identity, (0, 0.0, 0.0))
                self._retired[sender.report.identity] = (steps + sender.report.steps,
                                                         seconds + sender.report.seconds, max(seen, sender.seen))
        live = {s.report.identity for s in self._senders.values()}
        for identity, (_, _, when) in list(self._retired.items()):
            if now - when > self.ttl and identity not in live:
                del self._retired[identity]

    def snapshot(self) -> tuple[list[stepfeed.Report], dict[stepfeed.Identity, tuple[int, float]], Counter]:
        with self._lock:
            self._expire()
            return ([s.report for s in self._senders.values()],
                    {i: (n, sec) for i, (n, sec, _) in self._retired.items()}, Counter(self.results))


def rank_samples(reports: list[stepfeed.Report], retired: dict[stepfeed.Identity, tuple[int, float]],
                 place: Callable[[str], Placement]) -> list[Sample]:
    """Per rank (job_id, rank, gpu as the node names them): its processes' counts summed, the latest step end."""
    ranks: dict[tuple[str, str, str], list] = {}

    def labels(identity: stepfeed.Identity) -> tuple[str, str, str]:
        where = place(identity.gpu) if identity.gpu else Placement("", "", "")
        gpu = where.gpu or (identity.gpu if identity.gpu.isdigit() else "")
        return where.job_id or identity.job, identity.rank, gpu

    for identity, (steps, seconds) in retired.items():
        row = ranks.setdefault(labels(identity), [0, 0.0, None, -1])
        row[0] += steps
        row[1] += seconds
    for r in reports:
        row = ranks.setdefault(labels(r.identity), [0, 0.0, None, -1])
        row[0] += r.steps
        row[1] += r.seconds
        if r.steps and (row[2] is None or r.end >= row[2]):
            row[2], row[3] = r.end, r.step
    out = []
    for key, (steps, seconds, end, step) in ranks.items():
        out += [Sample(m.RANK_STEPS, key, float(steps)), Sample(m.RANK_STEP_SECONDS_TOTAL, key, seconds)]
        if end is not None:
            out.append(Sample(m.RANK_STEP_END, key, end))
        if end is not None and step >= 0:
            out.append(Sample(m.RANK_LAST_STEP, key, float(step)))
    return out


def bind(path: Path, mode: int) -> socket.socket:
    """The datagram socket at ``path``: a socket left there by an earlier agent is replaced, any other file is
    an error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise OSError(f"{path} exists and is not a socket")
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(str(path))
        os.chmod(path, mode)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        except OSError:
            pass
        sock.settimeout(0.5)
    except BaseException:
        sock.close()
        raise
    return sock


class StepsCollector:
    def __init__(self, options: StepsOptions, place: Callable[[str], Placement],
                 close: Callable[[], None] = lambda: None) -> None:
        self.options, self.place, self._close = options, place, close
        self.table = StepTable(options.max_senders, options.ttl)
        self.sock = bind(options.socket, options.socket_mode)
        self._inode = os.stat(options.socket).st_ino
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lockstep-steps", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(stepfeed.MAX_DATAGRAM + 1)
            except socket.timeout:
                continue
            except OSError as exc:
                if self._stop.is_set():
                    return
                once(log, logging.WARNING, "recv", "step feed socket: %s", exc)
                time.sleep(0.5)
                continue
            self.table.receive(data)

    def collect(self) -> list[Sample]:
        reports, retired, results = self.table.snapshot()
        out = rank_samples(reports, retired, self.place)
        out += [Sample(m.STEPS_SENDERS, (), float(len(reports))),
                Sample(m.STEPS_SENDERS_LIMIT, (), float(self.options.max_senders))]
        out += [Sample(m.STEPS_DATAGRAMS, (r,), float(results[r])) for r in m.DATAGRAM_RESULTS]
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.sock.close()
        try:
            if os.stat(self.options.socket).st_ino == self._inode:   # not a socket another agent bound since
                os.unlink(self.options.socket)
        except OSError:
            pass
        self._close()


@register("steps", default_enabled=False,
          help="each training rank's step ends, reported by its process through the step feed "
               "(lockstep.training.step_end()), joined to the GPU's job",
          add_flags=StepsOptions.add_flags)
def steps(config: "ExporterConfig") -> StepsCollector:
    options = StepsOptions.from_config(config)
    jobs = LazyJobs(config)
    placements = Placements(jobs.rows, jobs.refs, max_age=5.0)
    return StepsCollector(options, placements.of, jobs.close)
