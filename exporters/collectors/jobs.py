"""``jobs`` collector: which training job holds which GPU → ``lockstep_gpu_job_info``.

``--jobs.source=slurm`` reads the prolog's mapping directory (``lockstep.exporters.jobs.slurm``);
``kubernetes`` asks the kubelet which container holds which GPU and names the pod's job from its
labels, kept current by a watch of this node's pods (``lockstep.exporters.kube``); ``auto`` (the default) is
Kubernetes on a node with a kubelet PodResources socket or inside a pod, else Slurm. The job is
joined on this info metric, never copied onto every GPU series. While the API server is away after a
first successful list, the mapping keeps coming from the pods it last knew (the kubelet still says
which GPUs they hold) and the collector reports failure in ``lockstep_scrape_collector_success``.

Both sources name devices as the scheduler handed them out (index, GPU UUID, MIG UUID, a device
plugin's index or replica forms); one map from the GPU backend (``lockstep.exporters.gpu.mig.read_device_refs``)
and ``lockstep.exporters.jobs.devices.resolve`` turn them into the collector's labels. A MIG device's job carries
its parent GPU's index and the MIG UUID, which joins ``lockstep_gpu_mig_info`` for the GPU instance.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lockstep.exporters.catalog import gpu as m
from lockstep.exporters.gpu.backend import GpuOptions, open_backend
from lockstep.exporters.gpu.mig import DeviceRef, read_device_refs
from lockstep.exporters.jobs.rows import KUBERNETES, SLURM, JobRow
from lockstep.exporters.jobs.slurm import (  # noqa: F401 (the tests' API)
    JobMapping,
    SlurmSource,
    parse_mapping,
    read_dir,
)
from lockstep.exporters.kube.mapping import KubernetesSource
from lockstep.exporters.kube.options import KubernetesOptions
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.scrape import PartialFailure
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig

log = logging.getLogger("lockstep.jobs")
DEFAULT_DIR = Path("/var/run/lockstep/gpu-jobs")
SOURCES = (SLURM, KUBERNETES, "auto")
REFS_RETRY_S = 60.0


@dataclass(frozen=True)
class JobsOptions:
    mapping_dir: Path
    user_dir: Path
    gpu: GpuOptions = GpuOptions("nvml")   # where the GPUs' UUIDs come from
    source: str = SLURM                    # resolved: slurm or kubernetes
    kubernetes: KubernetesOptions = field(default_factory=KubernetesOptions)

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "jobs.source", choices=SOURCES,
                 help="where the GPU→job mapping comes from: slurm (the prolog's files), kubernetes "
                      "(kubelet and API server), auto: kubernetes where a kubelet socket exists or in "
                      "a pod, else slurm (default auto)")
        add_flag(group, "jobs.mapping-dir",
                 help=f"GPU→job mapping written by deploy/slurm/prolog-gpu-jobs.sh (default {DEFAULT_DIR})")
        add_flag(group, "jobs.user-dir",
                 help="job→user files written by the prolog (default: <mapping-dir>-users)")
        KubernetesOptions.add_flags(group)

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "JobsOptions":
        mapping_dir = Path(config.flag("jobs.mapping-dir", DEFAULT_DIR))
        user_dir = Path(config.flag("jobs.user-dir", f"{mapping_dir}-users"))
        kube = KubernetesOptions.from_config(config)
        source = config.flag("jobs.source", "auto")
        if source == "auto":
            source = KUBERNETES if kube.detected(os.environ) else SLURM
        return cls(mapping_dir, user_dir, GpuOptions.from_config(config), source, kube)


class JobsCollector:
    def __init__(self, slurm: SlurmSource | None, kube: KubernetesSource | None,
                 gpu_refs: Callable[[], dict[str, DeviceRef]]) -> None:
        """``gpu_refs``: ``{device id: DeviceRef}`` of the node's GPUs and MIG devices (``read_gpu_refs``)."""
        self.slurm, self.kube, self._gpu_refs = slurm, kube, gpu_refs
        self._refs: dict[str, DeviceRef] = {}   # read once from the GPU backend
        self._refs_tried = -REFS_RETRY_S         # monotonic time of the last attempt that found none

    def collect(self) -> list[Sample]:
        if self.kube is None:
            mappings: list[JobMapping] = self.slurm.mappings()
            return _samples(self.slurm.rows(mappings, self.refs() if mappings else {}), SLURM)
        rows, api_error = self.kube.rows()
        samples = _samples(rows, KUBERNETES)
        if api_error is not None:
            raise PartialFailure(f"API server: {api_error} (pods as last listed)", samples)
        return samples

    def close(self) -> None:
        if self.kube is not None:
            self.kube.close()

    def refs(self) -> dict[str, DeviceRef]:
        """The device map only enriches the mapping: a GPU backend that can't answer (no driver, a broken
        state file) leaves what the ids alone say instead of failing the job mapping too; no NVML init
        per scrape while the driver is away."""
        if not self._refs and time.monotonic() - self._refs_tried >= REFS_RETRY_S:
            self._refs_tried = time.monotonic()
            try:
                self._refs = self._gpu_refs()
            except Exception as exc:
                once(log, logging.WARNING, "uuids", "GPU UUIDs unavailable for job mapping: %s", exc)
        return self._refs


def _samples(rows: list[JobRow], scheduler: str) -> list[Sample]:
    return [Sample(m.JOB_INFO, row.labels(scheduler), 1.0) for row in rows]


def read_gpu_refs(options: GpuOptions) -> dict[str, DeviceRef]:
    """``{device id: DeviceRef}`` (indices, GPU and MIG UUIDs) from the configured GPU backend; empty when
    NVML is unavailable."""
    import pynvml

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


@register("jobs", help="training job holding each GPU, from Slurm or Kubernetes (lockstep_gpu_job_info)",
          add_flags=JobsOptions.add_flags)
def jobs_collector(config: "ExporterConfig") -> JobsCollector:
    options = JobsOptions.from_config(config)
    collector = JobsCollector(None, None, lambda: read_gpu_refs(options.gpu))
    if options.source == KUBERNETES:
        collector.kube = options.kubernetes.source(collector.refs)
    else:
        collector.slurm = SlurmSource(options.mapping_dir, options.user_dir)
    return collector


class LazyJobs:
    """The node's job mapping for another collector that joins its series to the GPU's job: the ``jobs``
    collector built from the same flags on first use, so a node where that collector never has anything to
    join opens no job mapping (nor a Kubernetes pod watch)."""

    def __init__(self, config: "ExporterConfig") -> None:
        self.config = config
        self._jobs: JobsCollector | None = None

    def _collector(self) -> JobsCollector:
        if self._jobs is None:
            self._jobs = jobs_collector(self.config)
        return self._jobs

    def rows(self):
        """The mapping's samples (``lockstep_gpu_job_info``)."""
        return self._collector().collect()

    def refs(self):
        """The GPU backend's device ids (index, UUID, MIG devices)."""
        return self._collector().refs()

    def pod_jobs(self) -> dict[str, str]:
        """``{pod UID: job id}`` of the pods holding GPUs, on a Kubernetes node; empty under Slurm."""
        kube = self._collector().kube
        return kube.pod_jobs() if kube is not None else {}

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.close()

