"""``jobs`` collector: which training job holds which GPU → ``lockstep_gpu_job_info``.

``--jobs.source=slurm`` reads the prolog's mapping directory (``exporters.jobs.slurm``);
``kubernetes`` asks the kubelet which container holds which GPU and names the pod's job from its
labels, kept current by a watch of this node's pods (``exporters.kube``); ``auto`` (the default) is
Kubernetes on a node with a kubelet PodResources socket or inside a pod, else Slurm. The job is
joined on this info metric, never copied onto every GPU series. While the API server is away after a
first successful list, the mapping keeps coming from the pods it last knew (the kubelet still says
which GPUs they hold) and the collector reports failure in ``lockstep_scrape_collector_success``.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from exporters.catalog import gpu as m
from exporters.gpu.backend import GpuOptions, open_backend
from exporters.jobs.rows import KUBERNETES, SLURM, JobRow
from exporters.jobs.slurm import JobMapping, SlurmSource, parse_mapping, read_dir  # noqa: F401 (the tests' API)
from exporters.kube.devices import refs_from_uuids
from exporters.kube.mapping import KubernetesSource
from exporters.kube.options import KubernetesOptions
from exporters.logs import once
from exporters.registry import register
from exporters.sample import Sample
from exporters.scrape import PartialFailure

if TYPE_CHECKING:
    from exporters.config import ExporterConfig

log = logging.getLogger("lockstep.jobs")
DEFAULT_DIR = Path("/var/run/lockstep/gpu-jobs")
SOURCES = (SLURM, KUBERNETES, "auto")
UUID_RETRY_S = 60.0


@dataclass(frozen=True)
class JobsOptions:
    mapping_dir: Path
    user_dir: Path
    gpu: GpuOptions = GpuOptions("nvml")   # where the GPUs' UUIDs come from
    source: str = SLURM                    # resolved: slurm or kubernetes
    kubernetes: KubernetesOptions = field(default_factory=KubernetesOptions)

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        group.add_argument("--jobs.source", dest="jobs.source", default=None, choices=SOURCES,
                           help="where the GPU→job mapping comes from: slurm (the prolog's files), kubernetes "
                                "(kubelet and API server), auto: kubernetes where a kubelet socket exists or in "
                                "a pod, else slurm (default auto)")
        group.add_argument("--jobs.mapping-dir", dest="jobs.mapping-dir", default=None,
                           help=f"GPU→job mapping written by deploy/slurm/prolog-gpu-jobs.sh (default {DEFAULT_DIR})")
        group.add_argument("--jobs.user-dir", dest="jobs.user-dir", default=None,
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
                 gpu_ids: Callable[[], dict[str, str]]) -> None:
        """``gpu_ids``: ``{index: uuid}`` of the node's GPUs (``gpu_uuids`` of the GPU backend)."""
        self.slurm, self.kube, self._gpu_ids = slurm, kube, gpu_ids
        self._uuids: dict[str, str] = {}   # index → UUID, read once from the GPU backend
        self._uuids_tried = -UUID_RETRY_S     # monotonic time of the last attempt that found none

    def collect(self) -> list[Sample]:
        if self.kube is None:
            mappings: list[JobMapping] = self.slurm.mappings()
            return _samples(self.slurm.rows(mappings, self._uuids_now() if mappings else {}), SLURM)
        rows, api_error = self.kube.rows()
        samples = _samples(rows, KUBERNETES)
        if api_error is not None:
            raise PartialFailure(f"API server: {api_error} (pods as last listed)", samples)
        return samples

    def close(self) -> None:
        if self.kube is not None:
            self.kube.close()

    def _uuids_now(self) -> dict[str, str]:
        """UUIDs only enrich the mapping: a GPU backend that can't answer (no driver, a broken state
        file) leaves ``uuid`` empty instead of failing the job mapping too; no NVML init per scrape
        while the driver is away."""
        if not self._uuids and time.monotonic() - self._uuids_tried >= UUID_RETRY_S:
            self._uuids_tried = time.monotonic()
            try:
                self._uuids = self._gpu_ids()
            except Exception as exc:
                once(log, logging.WARNING, "uuids", "GPU UUIDs unavailable for job mapping: %s", exc)
        return self._uuids


def _samples(rows: list[JobRow], scheduler: str) -> list[Sample]:
    return [Sample(m.JOB_INFO, row.labels(scheduler), 1.0) for row in rows]


def gpu_uuids(options: GpuOptions) -> dict[str, str]:
    """``{index: uuid}`` from the configured GPU backend; empty when NVML is unavailable."""
    import pynvml

    nvml, prof = open_backend(options)
    try:
        nvml.nvmlInit()
        try:
            return {str(i): uuid for i in range(nvml.nvmlDeviceGetCount()) if (uuid := _uuid(nvml, i))}
        finally:
            nvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        log.debug("GPU UUIDs unavailable for job mapping: %s", exc)
        return {}
    finally:
        if prof is not None:
            prof.close()


def _uuid(nvml: Any, index: int) -> str:
    import pynvml
    try:
        return nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
    except pynvml.NVMLError:  # a lost GPU keeps its index; only its UUID label stays empty
        return ""


@register("jobs", help="training job holding each GPU, from Slurm or Kubernetes (lockstep_gpu_job_info)",
          add_flags=JobsOptions.add_flags)
def jobs_collector(config: "ExporterConfig") -> JobsCollector:
    options = JobsOptions.from_config(config)
    collector = JobsCollector(None, None, lambda: gpu_uuids(options.gpu))
    if options.source == KUBERNETES:
        collector.kube = options.kubernetes.source(lambda: refs_from_uuids(collector._uuids_now()))
    else:
        collector.slurm = SlurmSource(options.mapping_dir, options.user_dir)
    return collector
