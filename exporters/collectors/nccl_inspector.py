"""``nccl-inspector`` (off by default): NCCL Inspector's per-GPU collective and point-to-point performance, from the
Prometheus textfiles its profiler plugin writes (``lockstep.exporters.nccl.inspector``; metrics and labels:
``lockstep.exporters.catalog.nccl_inspector``).

Each scrape lists ``--nccl-inspector.dir`` (the jobs' ``NCCL_INSPECTOR_DUMP_DIR``) and reads the files NCCL
changed since the last scrape; an unchanged file is served from its last parse, and of a rewritten one (NCCL writes
the same lines with new values) only the values are read again. NCCL rewrites a file in place, so a
file modified less than ``--nccl-inspector.settle`` ago, or while it was read, is not read: its last complete read
is served instead. A file that is cut, malformed or too large is skipped whole and counted. The file names carry
no PID: a file older than ``--nccl-inspector.max-age`` (its job idle or hung, or its process gone without removing
it) gets no series but its age. Per GPU, at most ``--nccl-inspector.max-communicators`` communicators (the largest)
and per communicator and operation ``--nccl-inspector.max-message-sizes`` message sizes (the largest) are served;
what the caps leave out is counted.

Each series is joined to the job holding its GPU (the file name's UUID) in the node's job mapping: the ``jobs``
collector's sources and flags, Slurm or Kubernetes, so a Kubernetes job's series carry its ``namespace/name``.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from lockstep.exporters.catalog import nccl_inspector as m
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.collectors.jobs import LazyJobs
from lockstep.exporters.config import number_flag
from lockstep.exporters.jobs.placement import Placement, Placements
from lockstep.exporters.nccl import inspector as fmt
from lockstep.exporters.nccl.inspector_names import METRICS as NCCL_METRICS
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig

log = logging.getLogger("lockstep.collector.nccl_inspector")
# The directory NCCL's README puts the files in for node_exporter's textfile collector.
DEFAULT_DIR = Path("/var/lib/node_exporter/nccl_inspector")
NAME_SETS = ("lockstep", "nccl")


def _gbs(value: float) -> float:
    return value * 1e9      # NCCL's GB/s: bytes / 1.0E9 / seconds (inspectorComputeOpBw)


def _us(value: float) -> float:
    return value / 1e6      # divided, not times 1e-6: the quotient nearest the value NCCL wrote


@dataclass(frozen=True)
class NcclInspectorOptions:
    dir: Path = DEFAULT_DIR
    max_age: float = 90.0
    settle: float = 0.25
    max_files: int = 64
    max_communicators: int = 16
    max_message_sizes: int = 16
    max_file_bytes: int = 1 << 20
    nccl_names: bool = False

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "nccl-inspector.dir", metavar="DIR",
                 help=f"where the jobs' NCCL Inspector writes its Prometheus files (NCCL_INSPECTOR_DUMP_DIR with "
                      f"NCCL_INSPECTOR_PROM_DUMP=1; default {DEFAULT_DIR})")
        add_flag(group, "nccl-inspector.max-age", type=float, metavar="SECONDS",
                 help="a file not rewritten for this long gets no series: its job idle or hung, or its process "
                      "gone (default 90: three of NCCL's minimum 30 s dump intervals; raise it with "
                      "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS)")
        add_flag(group, "nccl-inspector.settle", type=float, metavar="SECONDS",
                 help="a file modified more recently is being rewritten: its last complete read is served "
                      "(default 0.25)")
        add_flag(group, "nccl-inspector.max-files", type=int, metavar="N",
                 help="files read per scrape, in name order (default 64; NCCL writes one per GPU)")
        add_flag(group, "nccl-inspector.max-communicators", type=int, metavar="N",
                 help="communicators served per GPU, the largest first (default 16)")
        add_flag(group, "nccl-inspector.max-message-sizes", type=int, metavar="N",
                 help="message sizes served per communicator and operation, the largest first (default 16)")
        add_flag(group, "nccl-inspector.max-file-bytes", type=int, metavar="BYTES",
                 help="a larger file is skipped (default 1 MiB)")
        add_flag(group, "nccl-inspector.metric-names", choices=NAME_SETS,
                 help="nccl: also serve NCCL's own names and labels (nccl_bus_bandwidth_gbs, ...) for NCCL's "
                      "Grafana template; default lockstep")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "NcclInspectorOptions":
        seconds = {"max-age": number_flag(config, "nccl-inspector.max-age", 90.0, above=0),
                   "settle": number_flag(config, "nccl-inspector.settle", 0.25, at_least=0)}
        limits = {name: number_flag(config, f"nccl-inspector.{name}", default, at_least=1, integer=True)
                  for name, default in (("max-files", 64), ("max-communicators", 16), ("max-message-sizes", 16),
                                        ("max-file-bytes", 1 << 20))}
        names = str(config.flag("nccl-inspector.metric-names", "lockstep"))
        if names not in NAME_SETS:
            raise ValueError(f"--nccl-inspector.metric-names: {names!r} is not one of {', '.join(NAME_SETS)}")
        return cls(Path(config.flag("nccl-inspector.dir", DEFAULT_DIR)), seconds["max-age"], seconds["settle"],
                   limits["max-files"], limits["max-communicators"], limits["max-message-sizes"],
                   limits["max-file-bytes"], names == "nccl")


# ------------------------------------------------------------------------------------------ one file

@dataclass
class _Cached:
    key: tuple[int, int, int] | None = None        # (inode, size, mtime ns) of the read parsed below
    buckets: tuple[fmt.Bucket, ...] = ()
    good: bool = False                             # the read at ``key`` parsed
    memo: dict = field(default_factory=dict)       # its lines as last read (``fmt.parse``): a rewrite reads values only
    # how ``buckets`` are served (``_Served``: made again only when their labels or the GPU's job change), and the
    # samples of this read: made again when the read changes
    served: "_Served | None" = None
    samples: tuple[tuple[fmt.Bucket, ...], list[Sample]] | None = None


def read_bounded(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the file (one more than allowed tells a file that is too large)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 65536))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _key(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


# ------------------------------------------------------------------------------------------ caps and samples

def capped(buckets: Iterable[fmt.Bucket], max_comms: int, max_sizes: int) -> tuple[list[fmt.Bucket], int, int]:
    """(the buckets kept, communicators left out, message sizes left out): the communicators with the most ranks
    (then nodes, then name) and, per communicator and operation, the largest message sizes."""
    by_comm: dict[tuple, list[fmt.Bucket]] = {}
    for b in buckets:
        by_comm.setdefault(b.communicator, []).append(b)

    def size(text: str) -> int:
        return int(text) if text.isdigit() else -1

    order = sorted(by_comm, key=lambda c: (-size(c[2]), -size(c[3]), c[1], c[0]))
    kept, sizes_out = [], 0
    for comm in order[:max_comms]:
        sizes: dict[tuple[str, str], set[str]] = {}
        for b in by_comm[comm]:
            sizes.setdefault((b.kind, b.operation), set()).add(b.label("message_size"))
        allowed = set()
        for op, names in sizes.items():
            ranked = sorted(names, key=lambda s: (-fmt.message_size_bytes(s), s))
            allowed |= {(op, s) for s in ranked[:max_sizes]}
            sizes_out += max(0, len(ranked) - max_sizes)
        kept += [b for b in by_comm[comm] if ((b.kind, b.operation), b.label("message_size")) in allowed]
    return kept, max(0, len(order) - max_comms), sizes_out


def _job_id(place: Placement, bucket: fmt.Bucket) -> str:
    if place.job_id:
        return place.job_id
    slurm = bucket.label("slurm_job_id")
    return "" if slurm == "unknown" else slurm


def bucket_series(bucket: fmt.Bucket, place: Placement, nccl_names: bool) -> list[tuple[Metric, tuple, str, Callable]]:
    """A bucket's series, each as (family, labels, the NCCL value it serves, that value's unit): lockstep's families in
    base units, and NCCL's own where asked. They depend on its labels only: a rewrite with new values keeps them."""
    job = (_job_id(place, bucket), place.gpu, place.uuid)
    names = {name for name, _ in bucket.values}
    if bucket.kind == fmt.COLLECTIVE:
        labels = job + bucket.labels_of(m.COLLECTIVE[3:])
        table = ((fmt.BUS_BW, m.BUS_BANDWIDTH, _gbs), (fmt.ALGORITHM_BW, m.ALGORITHM_BANDWIDTH, _gbs),
                 (fmt.EXEC_TIME, m.EXEC_TIME, _us))
    else:
        labels = job + bucket.labels_of(m.P2P[3:])
        table = ((fmt.P2P_BUS_BW, m.P2P_BUS_BANDWIDTH, _gbs), (fmt.P2P_EXEC_TIME, m.P2P_EXEC_TIME, _us))
    out = [(metric, labels, name, unit) for name, metric, unit in table if name in names]
    if nccl_names:
        for name, _ in bucket.values:
            metric = NCCL_METRICS[name]
            out.append((metric, (job[0], place.uuid) + bucket.labels_of(metric.labels[2:]), name, float))
    return out


@dataclass(frozen=True)
class _Served:
    """What a file's buckets are served as, for their labels and GPU: the series of the buckets the caps keep (by
    their index in the read), and what the caps left out. A rewrite with the same buckets and new values reuses it."""

    shape: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    place: Placement
    series: tuple[tuple[int, tuple[tuple[Metric, tuple, str, Callable], ...]], ...]
    communicators_out: int
    sizes_out: int

    def samples(self, buckets: tuple[fmt.Bucket, ...]) -> list[Sample]:
        out = []
        for index, series in self.series:
            values = dict(buckets[index].values)
            out += [Sample(metric, labels, unit(values[name])) for metric, labels, name, unit in series]
        return out


def served(buckets: tuple[fmt.Bucket, ...], place: Placement, options: NcclInspectorOptions,
           last: _Served | None) -> _Served:
    """How ``buckets`` of the GPU at ``place`` are served: ``last`` when it was made for buckets of the same labels
    at the same place (a rewrite of the file with new values), else anew (the caps, then each kept bucket's series)."""
    shape = tuple((b.kind, b.labels) for b in buckets)
    if last is not None and last.shape == shape and last.place == place:
        return last
    kept, comms_out, sizes_out = capped(buckets, options.max_communicators, options.max_message_sizes)
    index = {id(b): i for i, b in enumerate(buckets)}
    series = tuple((index[id(b)], tuple(bucket_series(b, place, options.nccl_names))) for b in kept)
    return _Served(shape, place, series, comms_out, sizes_out)


# ------------------------------------------------------------------------------------------ the collector

@dataclass
class _Scrape:
    """What one scrape found, for the health series."""

    states: Counter = field(default_factory=Counter)
    capped: Counter = field(default_factory=Counter)


class NcclInspectorCollector:
    def __init__(self, options: NcclInspectorOptions, place: Callable[[str], Placement],
                 clock: Callable[[], float] = time.time, close: Callable[[], None] = lambda: None) -> None:
        """``place(uuid)``: the GPU a file's UUID names, and its job."""
        self.options, self.place, self.clock, self._close = options, place, clock, close
        self._files: dict[str, _Cached] = {}
        self._skipped: Counter = Counter({reason: 0 for reason in m.SKIP_REASONS})

    def collect(self) -> list[Sample]:
        found, scrape = self._list(), _Scrape()
        out: list[Sample] = []
        for name in found[self.options.max_files:]:
            scrape.capped["files"] += 1
            self._files.pop(name, None)
        for name in found[:self.options.max_files]:
            out += self._file(name, scrape)
        for name in set(self._files) - set(found):
            del self._files[name]
        out += [Sample(m.FILES, (state,), float(scrape.states[state])) for state in m.FILE_STATES]
        out += [Sample(m.READS_SKIPPED, (reason,), float(n)) for reason, n in self._skipped.items()]
        out += [Sample(m.CAPPED, (cap,), float(scrape.capped[cap])) for cap in m.CAPS[:3]]
        o = self.options
        out += [Sample(m.LIMIT, (cap,), float(v)) for cap, v in zip(m.CAPS, (o.max_files, o.max_communicators,
                                                                               o.max_message_sizes, o.max_file_bytes))]
        return out

    def close(self) -> None:
        self._close()

    def _list(self) -> list[str]:
        try:
            names = os.listdir(self.options.dir)
        except FileNotFoundError:      # no job has written here yet
            return []
        return sorted(n for n in names if fmt.FILE_NAME.match(n))

    def _file(self, name: str, scrape: _Scrape) -> list[Sample]:
        path = os.path.join(self.options.dir, name)
        uuid = fmt.FILE_NAME.match(name).group(1)
        place = self.place(uuid)
        if not place.uuid:      # a GPU the node's device ids don't list: the file still names it
            place = Placement(place.gpu, f"GPU-{uuid}", place.job_id)
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:      # removed by its process since the listing
            self._files.pop(name, None)
            return []
        except OSError as exc:
            return self._skip(name, "unreadable", exc, scrape)
        age = max(0.0, self.clock() - st.st_mtime)
        out = [Sample(m.FILE_AGE, (place.job_id, place.gpu, place.uuid), age)]
        if age > self.options.max_age:
            scrape.states["stale"] += 1
            self._files.pop(name, None)
            return out
        cached = self._files.setdefault(name, _Cached())
        if cached.key != _key(st):
            if age < self.options.settle:
                self._skipped["writing"] += 1
            else:
                self._read(path, st, cached)
        if not cached.good:
            scrape.states["skipped"] += 1
            return out
        scrape.states["served"] += 1
        if cached.samples is None or cached.samples[0] is not cached.buckets or cached.served.place != place:
            cached.served = served(cached.buckets, place, self.options, cached.served)
            cached.samples = (cached.buckets, cached.served.samples(cached.buckets))
        scrape.capped["communicators"] += cached.served.communicators_out
        scrape.capped["message_sizes"] += cached.served.sizes_out
        return out + cached.samples[1]

    def _read(self, path: str, st: os.stat_result, cached: _Cached) -> None:
        """Parse the file into ``cached``; a read that cannot be used leaves the last complete one, if the file
        is only being rewritten, or nothing."""
        try:
            if not os.path.isfile(path) or os.path.islink(path):
                raise OSError("not a regular file")
            data = read_bounded(path, self.options.max_file_bytes)
            after = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._count("unreadable", path, exc)
            cached.key, cached.good = _key(st), False
            return
        if _key(after) != _key(st) or (len(data) != after.st_size and len(data) <= self.options.max_file_bytes):
            self._skipped["writing"] += 1     # changed while read: the next scrape reads it whole
            return
        cached.key = _key(st)
        if len(data) > self.options.max_file_bytes:
            self._count("too_large", path, f"over {self.options.max_file_bytes} bytes")
            cached.good = False
            return
        try:
            cached.buckets, cached.good = fmt.parse(data, cached.memo), True
        except fmt.InspectorFileError as exc:
            self._count(exc.reason, path, exc)
            cached.buckets, cached.good = (), False

    def _skip(self, name: str, reason: str, error: object, scrape: _Scrape) -> list[Sample]:
        self._count(reason, name, error)
        self._files.pop(name, None)
        scrape.states["skipped"] += 1
        return []

    def _count(self, reason: str, path: str, error: object) -> None:
        self._skipped[reason] += 1
        once(log, logging.INFO, f"{reason}:{path}", "NCCL Inspector file %s skipped (%s): %s", path, reason, error)


@register("nccl-inspector", default_enabled=False,
          help="NCCL Inspector's per-GPU collective and point-to-point bandwidth and execution times, from its "
               "Prometheus files, joined to the GPU's job",
          add_flags=NcclInspectorOptions.add_flags)
def nccl_inspector(config: "ExporterConfig") -> NcclInspectorCollector:
    options = NcclInspectorOptions.from_config(config)
    jobs = LazyJobs(config)   # no job mapping (nor pod watch) where no file is ever written
    placements = Placements(jobs.rows, jobs.refs, max_age=5.0)
    return NcclInspectorCollector(options, placements.of, close=jobs.close)
