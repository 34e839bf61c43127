"""``job-io``: per training job, bytes and operations per block device and I/O pressure, from the job's
cgroup v2 group under ``<sysfs>/fs/cgroup`` (``io.stat``, ``io.pressure``; the layouts are in
``lockstep.exporters.storage.jobcgroups``). Devices are named by ``<procfs>/self/mountinfo`` (the mounts
under ``--path.rootfs``). Slurm jobs are named by their cgroup; a Kubernetes pod by its UID and, for the
pods holding this node's GPUs, its job from the job mapping (``--jobs.*``); other pods are left out unless
``--job-io.all-pods``. One unreadable or corrupt group loses that group alone."""
from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from lockstep.exporters.catalog import storage as m
from lockstep.exporters.collectors.jobs import LazyJobs
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.scrape import PartialFailure
from lockstep.exporters.storage.cgroupio import CgroupFormatError, parse_io_stat, parse_pressure
from lockstep.exporters.storage.jobcgroups import PARENTS, SLURM_SCOPE, JobGroup, kube_pod, slurm_job
from lockstep.exporters.storage.mountinfo import DeviceMount, parse_mountinfo
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.job_io")
UNNAMED = DeviceMount("", "")
POD_JOBS_MAX_AGE_S = 5.0   # the kubelet is asked at most this often, however many scrapes come


@dataclass(frozen=True)
class JobIoOptions:
    cgroupfs: Path
    procfs: Path
    rootfs: Path = Path("/")
    all_pods: bool = False

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "job-io.all-pods", action="store_const", const=True,
                 help="report every Kubernetes pod's I/O, not only the pods holding this node's GPUs")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "JobIoOptions":
        return cls(config.sysfs / "fs" / "cgroup", config.procfs, config.rootfs,
                   bool(config.flag("job-io.all-pods", False)))


def job_groups(cgroupfs: str) -> Iterator[tuple[JobGroup, str]]:
    """Every job group under the cgroup v2 mount: (job, its directory)."""
    for parent in PARENTS:
        try:
            names = sorted(os.listdir(os.path.join(cgroupfs, parent)))
        except OSError:
            continue  # this layout is not in use here
        for name in names:
            path = os.path.join(cgroupfs, parent, name)
            if parent == "system.slice":
                if SLURM_SCOPE.match(name):
                    yield from _slurm_jobs(path)
            elif (pod := kube_pod(name)) is not None:
                yield pod, path


def _slurm_jobs(scope: str) -> Iterator[tuple[JobGroup, str]]:
    try:
        names = sorted(os.listdir(scope))
    except OSError:
        return
    for name in names:
        if (job := slurm_job(name)) is not None:
            yield job, os.path.join(scope, name)


class JobIoCollector:
    def __init__(self, options: JobIoOptions, pod_jobs: Callable[[], Mapping[str, str]],
                 close: Callable[[], None] = lambda: None) -> None:
        self.options = options
        self.cgroupfs = os.fspath(options.cgroupfs)
        self._pod_jobs, self.close = pod_jobs, close
        self._pods: Mapping[str, str] = {}
        self._pods_at = -POD_JOBS_MAX_AGE_S
        self._mounts: tuple[str, dict[str, DeviceMount]] = ("", {})   # the mount table's last text, parsed

    def pod_jobs(self) -> Mapping[str, str]:
        if time.monotonic() - self._pods_at >= POD_JOBS_MAX_AGE_S:
            self._pods = self._pod_jobs()   # raises: tried again next scrape
            self._pods_at = time.monotonic()
        return self._pods

    def collect(self) -> list[Sample]:
        groups = list(job_groups(self.cgroupfs))
        if not groups:
            return []  # an idle node, or no cgroup v2: nothing to report, and nothing failed
        pods: Mapping[str, str] = {}
        mapping_error = None
        if any(g.scheduler != "slurm" for g, _ in groups):
            try:
                pods = self.pod_jobs()
            except Exception as exc:  # the pods' jobs unknown: Slurm groups (and --job-io.all-pods) still count
                mapping_error = f"job mapping: {exc}"
        devices = self._devices()
        samples: list[Sample] = []
        for group, path in groups:
            if group.scheduler == "slurm":
                labels = (group.key, group.scheduler, "")
            elif group.key in pods or self.options.all_pods:
                labels = (pods.get(group.key, ""), group.scheduler, group.key)
            else:
                continue
            samples.extend(self._group(labels, path, devices))
        if mapping_error is not None:
            raise PartialFailure(mapping_error, samples)
        return samples

    def _devices(self) -> dict[str, DeviceMount]:
        try:
            text = read_text(os.path.join(self.options.procfs, "self", "mountinfo"))
        except OSError as exc:
            once(log, logging.WARNING, "mountinfo", "cannot read the mount table, devices stay unnamed: %s", exc)
            return {}
        if text != self._mounts[0]:   # a node's mount table (hundreds of lines under Kubernetes) rarely changes
            self._mounts = (text, parse_mountinfo(text, str(self.options.rootfs)))
        return self._mounts[1]

    def _group(self, labels: tuple[str, str, str], path: str, devices: Mapping[str, DeviceMount]) -> Iterable[Sample]:
        try:
            text = read_text(os.path.join(path, "io.stat"))
        except FileNotFoundError:
            return ()  # the job ended between listing and reading, or the io controller is not enabled here
        except OSError as exc:
            once(log, logging.WARNING, "read:" + path, "cannot read %s/io.stat: %s", path, exc)
            return ()
        errors: list[str] = []
        out = []
        for d in parse_io_stat(text, errors):
            mount = devices.get(d.device, UNNAMED)
            dev_labels = labels + (d.device, mount.mountpoint, mount.fstype)
            out += (Sample(m.JOB_IO_READ_BYTES, dev_labels, float(d.read_bytes)),
                    Sample(m.JOB_IO_WRITE_BYTES, dev_labels, float(d.write_bytes)),
                    Sample(m.JOB_IO_READS, dev_labels, float(d.reads)),
                    Sample(m.JOB_IO_WRITES, dev_labels, float(d.writes)))
        for error in errors:
            once(log, logging.WARNING, "corrupt:" + path, "%s/io.stat: skipped a corrupt line: %s", path, error)
        out.extend(self._pressure(labels, path))
        return out

    def _pressure(self, labels: tuple[str, str, str], path: str) -> list[Sample]:
        try:
            pressure = parse_pressure(read_text(os.path.join(path, "io.pressure")))
        except FileNotFoundError:
            return []  # a kernel without PSI (CONFIG_PSI, or psi=0 on the command line)
        except (OSError, CgroupFormatError) as exc:
            once(log, logging.WARNING, "pressure:" + path, "%s/io.pressure: %s", path, exc)
            return []
        out = [Sample(m.JOB_IO_PRESSURE, labels + ("some",), pressure.some_seconds)]
        if pressure.full_seconds is not None:
            out.append(Sample(m.JOB_IO_PRESSURE, labels + ("full",), pressure.full_seconds))
        return out


@register("job-io", help="per-job block I/O and I/O pressure from the job's cgroup v2 group (Slurm, Kubernetes)",
          add_flags=JobIoOptions.add_flags)
def job_io(config: ExporterConfig) -> JobIoCollector:
    jobs = LazyJobs(config)   # opened only on a node with a Kubernetes pod's group
    return JobIoCollector(JobIoOptions.from_config(config), jobs.pod_jobs, close=jobs.close)
