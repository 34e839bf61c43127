"""``jobs`` collector: which Slurm job holds which GPU → ``lockstep_gpu_job_info{gpu,uuid,job_id,user}``.

Reads the mapping directory the prolog/epilog in deploy/slurm/ maintain, in dcgm-exporter's
``--hpc-job-mapping-dir`` layout: one file per GPU, named by its index (or its UUID: newer Slurm puts
UUIDs in CUDA_VISIBLE_DEVICES; a MIG device's is MIG-<uuid>), holding one job id per line. The job's
user is in ``<user-dir>/<job_id>``. The job is joined on this info metric, never copied onto every
GPU series. A MIG device's job carries its parent GPU's index and the MIG UUID, which joins
``lockstep_gpu_mig_info`` for the GPU instance (``exporters.gpu.mig.device_refs`` resolves the ids).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from exporters.catalog import gpu as m
from exporters.gpu.backend import GpuOptions, open_backend
from exporters.logs import once
from exporters.registry import register
from exporters.sample import Sample
from exporters.readfile import read_text

if TYPE_CHECKING:
    from exporters.config import ExporterConfig

log = logging.getLogger("lockstep.jobs")
DEFAULT_DIR = Path("/var/run/lockstep/gpu-jobs")
_JOB_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")   # Slurm: 123, 123_4 (arrays), 123+1 (het jobs)
UUID_RETRY_S = 60.0
_GPU_NAME = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+)$")


@dataclass(frozen=True)
class JobsOptions:
    mapping_dir: Path
    user_dir: Path
    gpu: GpuOptions = GpuOptions("nvml")   # where the GPUs' UUIDs come from

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        group.add_argument("--jobs.mapping-dir", dest="jobs.mapping-dir", default=None,
                           help=f"GPU→job mapping written by deploy/slurm/prolog-gpu-jobs.sh (default {DEFAULT_DIR})")
        group.add_argument("--jobs.user-dir", dest="jobs.user-dir", default=None,
                           help="job→user files written by the prolog (default: <mapping-dir>-users)")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "JobsOptions":
        mapping_dir = Path(config.flag("jobs.mapping-dir", DEFAULT_DIR))
        user_dir = Path(config.flag("jobs.user-dir", f"{mapping_dir}-users"))
        return cls(mapping_dir, user_dir, GpuOptions.from_config(config))


@dataclass(frozen=True, slots=True)
class JobMapping:
    gpu: str      # file name: an index or a UUID
    job_id: str


def parse_mapping(files: Mapping[str, str]) -> list[JobMapping]:
    """``{file name: content}`` of the mapping directory → (gpu, job) pairs; other files are ignored."""
    out = []
    for name, text in sorted(files.items()):
        if not _GPU_NAME.match(name):
            continue
        out.extend(JobMapping(name, line.strip()) for line in text.splitlines() if line.strip())
    return out


def read_dir(path: str) -> dict[str, str]:
    files = {}
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return {}
    for name in names:
        entry = os.path.join(path, name)
        try:
            files[name] = read_text(entry)
        except (FileNotFoundError, IsADirectoryError):  # removed by an epilog mid-scrape, or a subdirectory
            continue
        except PermissionError as exc:  # one unreadable file loses that GPU's mapping, not every GPU's
            once(log, logging.WARNING, f"perm:{name}", "cannot read job mapping %s: %s", entry, exc.strerror)
            continue
    return files


class JobsCollector:
    def __init__(self, options: JobsOptions, gpu_ids: Callable[[], dict[str, Any]]) -> None:
        """``gpu_ids``: ``{device id: DeviceRef}`` of the node's GPUs and MIG devices (``gpu_uuids``)."""
        self.mapping_dir, self.user_dir = os.fspath(options.mapping_dir), os.fspath(options.user_dir)
        self._gpu_ids = gpu_ids
        self._refs: dict[str, Any] = {}   # device id → exporters.gpu.mig.DeviceRef, read once from the GPU backend
        self._uuids_tried = -UUID_RETRY_S     # monotonic time of the last attempt that found none

    def collect(self) -> Iterator[Sample]:
        mappings = parse_mapping(read_dir(self.mapping_dir))
        if mappings and not self._refs and time.monotonic() - self._uuids_tried >= UUID_RETRY_S:
            self._uuids_tried = time.monotonic()  # no NVML init per scrape while the driver is away
            self._refs = self._read_uuids()
        # A training job usually holds every GPU of the node: its user file is read once, not per GPU.
        users = {job_id: self._user(job_id) for job_id in {mapping.job_id for mapping in mappings}}
        # A GPU named by both an index file and a UUID file (two prologs, or a prolog switched from
        # indices to UUIDs) resolves to one label set: one series, not a duplicate line.
        seen: set[tuple[str, str, str]] = set()
        for mapping in mappings:
            ref = self._refs.get(mapping.gpu)
            if ref is not None:
                gpu, uuid = ref.gpu, ref.uuid
            else:   # a device NVML does not list (any more): the file name says what it can
                gpu, uuid = (mapping.gpu, "") if mapping.gpu.isdigit() else ("", mapping.gpu)
            if (gpu, uuid, mapping.job_id) not in seen:
                seen.add((gpu, uuid, mapping.job_id))
                yield Sample(m.JOB_INFO, (gpu, uuid, mapping.job_id, users[mapping.job_id]), 1.0)

    def _read_uuids(self) -> dict[str, Any]:
        """UUIDs only enrich the mapping: a GPU backend that can't answer (no driver, a broken state
        file) leaves ``uuid`` empty instead of failing the job mapping too."""
        try:
            return self._gpu_ids()
        except Exception as exc:
            once(log, logging.WARNING, "uuids", "GPU UUIDs unavailable for job mapping: %s", exc)
            return {}

    def _user(self, job_id: str) -> str:
        if not _JOB_ID.match(job_id):  # a job id is a path component here: no "..", no "/"
            return ""
        try:
            return read_text(os.path.join(self.user_dir, job_id)).strip()
        except (FileNotFoundError, NotADirectoryError):
            return ""


def gpu_uuids(options: GpuOptions) -> dict[str, Any]:
    """``{device id: DeviceRef}`` (indices, GPU and MIG UUIDs) from the configured GPU backend; empty when
    NVML is unavailable."""
    import pynvml

    from exporters.gpu.mig import read_device_refs
    nvml, prof = open_backend(options)
    try:
        nvml.nvmlInit()
        try:
            return read_device_refs(nvml)
        finally:
            nvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        log.debug("GPU UUIDs unavailable for job mapping: %s", exc)
        return {}
    finally:
        if prof is not None:
            prof.close()


@register("jobs", help="Slurm job holding each GPU (lockstep_gpu_job_info)", add_flags=JobsOptions.add_flags)
def jobs_collector(config: "ExporterConfig") -> JobsCollector:
    options = JobsOptions.from_config(config)
    return JobsCollector(options, lambda: gpu_uuids(options.gpu))
