"""``nccl-ras`` (off by default): NCCL's own view of the job on this node, from its RAS service.

Every process of an NCCL job (2.24 and later, RAS on by default) shares a listening socket, by default
``localhost:28028`` (``NCCL_RAS_ADDR``), whose status answer covers the whole job: each communicator's size,
its missing ranks (with their node, process, CUDA and NVML device, unresponsive or dead), asynchronous errors
and every rank's count of collectives issued by type. A rank whose counts stop while its peers' are ahead is
the rank the job waits for.

RAS is polled in a background thread (``exporters.nccl.rasclient``: JSON where NCCL offers it, text before
2.28.7) and a scrape serves the last answer with its age: a scrape never waits on RAS, however slow or silent it
is. Connection refused is "no NCCL job here" (``lockstep_nccl_ras_no_job``), not an error.

Series: per communicator with a rank on this node (at most ``--nccl-ras.max-communicators``, those with
problems first), its counts; per rank on this node, its collective counts and identity; per missing rank,
wherever it runs, who it is (so the rank on a node that is gone is still named). A rank is on this node when
the address RAS gives for it is one of this node's (read from procfs, or ``--nccl-ras.node-address``). Its
``job_id`` is the job holding its GPU (RAS's NVML index) in the node's job mapping (the ``jobs`` collector's
sources and flags), else the Slurm job of its process (its cgroup); the communicator's is its local ranks'.
"""
from __future__ import annotations

import argparse
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from lockstep.exporters.catalog import nccl as m
from lockstep.exporters.collectors.jobs import LazyJobs
from lockstep.exporters.config import number_flag
from lockstep.exporters.jobs.placement import Placements
from lockstep.exporters.nccl.node import LocalAddresses, normal_address, slurm_job_of_pid
from lockstep.exporters.nccl.ras import NCCL_RESULTS, Communicator, RasParseError, RasStatus, parse
from lockstep.exporters.nccl.rasclient import (
    DEFAULT_ADDRESS,
    FORMATS,
    RasAnswer,
    RasClient,
    RasError,
    RasRefused,
    RasTimeout,
    parse_address,
)
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig

log = logging.getLogger("lockstep.collector.nccl_ras")
# Ranks of one communicator on one node that get series: NCCL allows NCCL_MAX_LOCAL_RANKS per node (72 in
# NCCL 2.30); a bound for an answer that would put far more here (every rank on one address).
MAX_LOCAL_RANKS = 256


@dataclass(frozen=True)
class NcclRasOptions:
    host: str = "localhost"
    port: int = 28028
    interval: float = 15.0
    timeout: float = 10.0
    format: str = "auto"
    max_communicators: int = 32
    max_missing_ranks: int = 32
    max_answer_bytes: int = 16 << 20
    node_addresses: tuple[str, ...] | None = None   # None: this node's, from procfs
    procfs: Path = Path("/proc")
    node_name: str = ""

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "nccl-ras.address", metavar="HOST:PORT",
                 help=f"NCCL's RAS client socket, in NCCL_RAS_ADDR's form (default {DEFAULT_ADDRESS})")
        add_flag(group, "nccl-ras.poll-interval", type=float, metavar="SECONDS",
                 help="how often RAS is asked (default 15)")
        add_flag(group, "nccl-ras.timeout", type=float, metavar="SECONDS",
                 help="limit on one poll: connect, handshake and answer; RAS is told to wait for other "
                      "processes 6 s less (default 10)")
        add_flag(group, "nccl-ras.format", choices=FORMATS,
                 help="answer format: json where NCCL offers it (2.28.7 and later) else text (auto, default), "
                      "or only one")
        add_flag(group, "nccl-ras.max-communicators", type=int, metavar="N",
                 help="communicators with a rank on this node that get series (default 32)")
        add_flag(group, "nccl-ras.max-missing-ranks", type=int, metavar="N",
                 help="missing ranks named per communicator (default 32)")
        add_flag(group, "nccl-ras.max-answer-bytes", type=int, metavar="BYTES",
                 help="largest answer read (default 16 MiB; a JSON answer lists every rank of the job)")
        add_flag(group, "nccl-ras.node-address", metavar="ADDR[,ADDR...]",
                 help="the addresses NCCL knows this node by (default: this node's addresses, from procfs)")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "NcclRasOptions":
        address = config.flag("nccl-ras.address", DEFAULT_ADDRESS)
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise ValueError(f"--nccl-ras.address: {exc}") from None
        numbers = {name: number_flag(config, f"nccl-ras.{name}", default, above=0)
                   for name, default in (("poll-interval", 15.0), ("timeout", 10.0))}
        limits = {name: number_flag(config, f"nccl-ras.{name}", default, at_least=low, integer=True)
                  for name, default, low in (("max-communicators", 32, 0), ("max-missing-ranks", 32, 0),
                                             ("max-answer-bytes", 16 << 20, 1))}
        nodes = config.flag("nccl-ras.node-address")
        node_addresses = tuple(normal_address(a.strip()) for a in nodes.split(",") if a.strip()) if nodes else None
        return cls(host, port, numbers["poll-interval"], numbers["timeout"], config.flag("nccl-ras.format", "auto"),
                   limits["max-communicators"], limits["max-missing-ranks"], limits["max-answer-bytes"],
                   node_addresses, config.procfs, config.node_name)


# ------------------------------------------------------------------------------------------ the answer

def _rank_state_label(state: str) -> str:
    return state if state in m.RANK_STATES else ""


def _error_label(code: int | None) -> str:
    if code is None:
        return ""
    return NCCL_RESULTS[code] if 0 <= code < len(NCCL_RESULTS) else "unknown"


def _gpu(nvml_dev: int) -> str:
    return str(nvml_dev) if nvml_dev >= 0 else ""


def _has_problem(c: Communicator) -> bool:
    return bool(c.missing_count or c.unresponsive_count or c.async_error_count or c.missing or c.problems)


def status_samples(status: RasStatus, options: NcclRasOptions, local: set[str],
                   job_of: Callable[[int, int], str]) -> list[Sample]:
    """The answer's samples for this node. ``local``: the addresses (and names) RAS may give this node;
    ``job_of(nvml_dev, pid)``: the job of a rank on this node ("" unknown)."""
    def here(host: str) -> bool:
        return bool(host) and normal_address(host) in local

    out: list[Sample] = []
    seen, candidates = set(), []
    for c in status.communicators:
        if c.hash in seen:
            once(log, logging.INFO, f"dup:{c.hash}", "two communicators share hash %s; the second is left out",
                 c.hash)
            continue
        seen.add(c.hash)
        if any(here(r.host) for r in c.ranks) or any(here(r.host) for r in c.missing):
            candidates.append(c)
    candidates.sort(key=lambda c: (not _has_problem(c), -(c.size or 0), c.hash))
    exported = candidates[:options.max_communicators]
    answer = status.communicators_count if status.communicators_count is not None else len(status.communicators)
    out += [Sample(m.RAS_COMMUNICATORS, ("answer",), float(answer)),
            Sample(m.RAS_COMMUNICATORS, ("local",), float(len(candidates))),
            Sample(m.RAS_COMMUNICATORS, ("exported",), float(len(exported))),
            Sample(m.RAS_COMMUNICATORS_LIMIT, (), float(options.max_communicators))]
    for metric, value in ((m.RAS_TIMEOUTS, status.timeouts), (m.RAS_DEAD_PROCESSES, status.dead_process_count),
                          (m.RAS_UNRESPONSIVE_PROCESSES, status.unresponsive_process_count)):
        if value is not None:
            out.append(Sample(metric, (), float(value)))
    for c in exported:
        out += _communicator_samples(c, status.format, here, job_of, options.max_missing_ranks)
    # The addresses RAS gives this node's ranks: what names the node in other nodes' missing ranks.
    addresses = {normal_address(r.host) for c in candidates for r in (*c.ranks, *c.missing) if here(r.host)}
    out += [Sample(m.RAS_NODE_ADDRESS, (address,), 1.0) for address in sorted(addresses)]
    # An answer that names a rank twice (two communicators under one hash) must not make a series twice.
    unique: dict[tuple, Sample] = {}
    for sample in out:
        unique.setdefault((sample.metric.name, sample.labels), sample)
    return list(unique.values())


def _communicator_samples(c: Communicator, fmt: str, here: Callable[[str], bool], job_of: Callable[[int, int], str],
                          max_missing: int) -> list[Sample]:
    local_ranks = [r for r in c.ranks if here(r.host)]
    if len(local_ranks) > MAX_LOCAL_RANKS:
        once(log, logging.WARNING, f"local:{c.hash}", "communicator %s has %d ranks on this node; series for the "
             "first %d", c.hash, len(local_ranks), MAX_LOCAL_RANKS)
        local_ranks = local_ranks[:MAX_LOCAL_RANKS]
    jobs = {r.rank: job_of(r.nvml_dev, r.pid) for r in local_ranks}
    jobs.update({r.rank: job_of(r.nvml_dev, r.pid) for r in c.missing if here(r.host)})
    named = Counter(j for j in jobs.values() if j)
    job_id = named.most_common(1)[0][0] if named else ""
    comm = (c.hash, job_id)
    out = [Sample(metric, comm, float(value)) for metric, value in (
        (m.COMMUNICATOR_RANKS, c.size), (m.COMMUNICATOR_MISSING_RANKS, c.missing_count),
        (m.COMMUNICATOR_UNRESPONSIVE_RANKS, c.unresponsive_count), (m.COMMUNICATOR_DEAD_RANKS, c.dead_count),
        (m.COMMUNICATOR_ASYNC_ERROR_RANKS, c.async_error_count)) if value is not None]
    # A JSON answer counts every collective for every rank: only those the communicator uses get series.
    used = {name for r in c.ranks for name, value in r.counts if value > 0}
    furthest = dict(c.furthest)
    for r in local_ranks:
        labels = comm + (str(r.rank), _gpu(r.nvml_dev))
        out.append(Sample(m.RANK_INFO, labels + (str(r.pid) if r.pid >= 0 else "",
                                                 str(r.cuda_dev) if r.cuda_dev >= 0 else "",
                                                 _rank_state_label(r.state), _error_label(r.async_error)), 1.0))
        out += [Sample(m.RANK_COLLECTIVES, labels + (name,), float(value)) for name, value in r.counts
                if fmt != "json" or name in used]
        known = [(furthest[name], value) for name, value in r.counts if name in furthest]
        if known:
            out.append(Sample(m.RANK_BEHIND, labels, float(sum(most - value for most, value in known))))
    for r in c.missing[:max_missing]:
        reason = "dead" if r.dead else ("not_member" if r.not_member else "unresponsive")
        out.append(Sample(m.MISSING_RANK_INFO, comm + (str(r.rank), r.host, str(r.pid) if r.pid >= 0 else "",
                                                       _gpu(r.nvml_dev), reason), 1.0))
    return out


# ------------------------------------------------------------------------------------------ polling

@dataclass(frozen=True)
class _State:
    """What a scrape serves; replaced whole by each poll."""

    polls: tuple[tuple[str, int], ...] = tuple((r, 0) for r in m.POLL_RESULTS)
    result: str = ""                        # the last poll's; "" before the first one ends
    duration: float | None = None
    answered_at: float | None = None        # monotonic time of the answer served
    samples: tuple[Sample, ...] = ()        # the answer's


class RasPoller:
    """Asks RAS every ``interval`` seconds in a daemon thread; ``state`` is what the last poll left."""

    def __init__(self, options: NcclRasOptions, job_of: Callable[[int, int], str],
                 ask: Callable[[], RasAnswer] | None = None, local: Callable[[], set[str]] | None = None) -> None:
        self.options, self.job_of = options, job_of
        self.ask = ask or RasClient(options.host, options.port, timeout=options.timeout, fmt=options.format,
                                    max_bytes=options.max_answer_bytes).query
        self.local = local or self._local
        self._addresses = LocalAddresses(options.procfs)
        self.state = _State()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _local(self) -> set[str]:
        names = {self.options.node_name, self.options.node_name.split(".")[0]} - {""}
        if self.options.node_addresses is not None:
            return set(self.options.node_addresses) | names
        return self._addresses() | names

    def poll_once(self) -> str:
        """One poll; returns its result (one of ``POLL_RESULTS``)."""
        started = time.monotonic()
        samples, answered = self.state.samples, self.state.answered_at
        try:
            answer = self.ask()
            status = parse(answer.body, answer.format)
            samples = (Sample(m.RAS_INFO, (status.nccl_version, str(answer.protocol), answer.format), 1.0),
                       *status_samples(status, self.options, self.local(), self.job_of))
            answered, result = time.monotonic(), "ok"
        except RasRefused:
            samples, answered, result = (), None, "no_job"
        except RasTimeout as exc:
            result = "timeout"
            log.debug("RAS did not answer: %s", exc)
        except (RasError, RasParseError, OSError) as exc:
            result = "error"
            once(log, logging.WARNING, f"error:{type(exc).__name__}", "NCCL RAS answer unusable: %s", exc)
        except Exception as exc:   # never let the poll thread die
            result = "error"
            once(log, logging.ERROR, f"bug:{type(exc).__name__}", "NCCL RAS poll failed: %r", exc)
            log.debug("NCCL RAS poll traceback", exc_info=True)
        polls = tuple((r, n + (r == result)) for r, n in self.state.polls)
        self.state = _State(polls, result, time.monotonic() - started, answered, tuple(samples))
        return result

    def start(self) -> "RasPoller":
        self._thread = threading.Thread(target=self._run, name="lockstep-nccl-ras", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, self.options.interval - (time.monotonic() - started)))

    def close(self) -> None:
        """Stops polling; a poll under way ends by its own deadline (the thread is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)


class NcclRasCollector:
    def __init__(self, poller: RasPoller, close: Callable[[], None] = lambda: None) -> None:
        self.poller, self._close = poller, close

    def collect(self) -> Iterable[Sample]:
        state = self.poller.state
        out = [Sample(m.RAS_POLLS, (result,), float(n)) for result, n in state.polls]
        if state.result:
            out += [Sample(m.RAS_UP, (), 1.0 if state.result == "ok" else 0.0),
                    Sample(m.RAS_NO_JOB, (), 1.0 if state.result == "no_job" else 0.0)]
        if state.duration is not None:
            out.append(Sample(m.RAS_POLL_DURATION, (), state.duration))
        if state.answered_at is not None:
            out.append(Sample(m.RAS_ANSWER_AGE, (), max(0.0, time.monotonic() - state.answered_at)))
            out += state.samples
        return out

    def close(self) -> None:
        self.poller.close()
        self._close()


# ------------------------------------------------------------------------------------------ the job mapping

class JobLookup:
    """``(nvml_dev, pid) -> job_id``: the node's GPU→job mapping (what the ``jobs`` collector serves, from the
    same flags), else the Slurm job of the process."""

    def __init__(self, placements: Placements, procfs: Path) -> None:
        self.placements, self.procfs = placements, procfs

    def __call__(self, nvml_dev: int, pid: int) -> str:
        job = self.placements.of(_gpu(nvml_dev)).job_id if nvml_dev >= 0 else ""
        return job or slurm_job_of_pid(self.procfs, pid)


@register("nccl-ras", default_enabled=False,
          help="NCCL's RAS view of the job on this node: communicators, missing and dead ranks, asynchronous "
               "errors, per-rank collective counts (polled in the background)",
          add_flags=NcclRasOptions.add_flags)
def nccl_ras(config: "ExporterConfig") -> NcclRasCollector:
    options = NcclRasOptions.from_config(config)
    jobs = LazyJobs(config)   # no job mapping (nor pod watch) on a node without NCCL jobs
    # RAS names a rank's GPU by its NVML index: the device ids are not needed
    placements = Placements(jobs.rows, dict, max_age=options.interval)
    poller = RasPoller(options, JobLookup(placements, options.procfs)).start()
    return NcclRasCollector(poller, jobs.close)
