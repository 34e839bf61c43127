"""Where a GPU named by another program is on this node, and which job holds it: the ``gpu`` index, ``uuid`` and
``job_id`` the node agent's other series carry, from what the ``jobs`` collector serves (``lockstep_gpu_job_info``:
Slurm's mapping files or the kubelet and the API server) and the GPU backend's device ids.

NCCL names a GPU by its CUDA UUID without the ``GPU-`` prefix; a training process by an index or a ``GPU-``/``MIG-``
UUID from ``CUDA_VISIBLE_DEVICES``. ``Placements.of(device)`` takes any of these.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from lockstep.exporters.catalog import gpu as gpu_metrics
from lockstep.exporters.gpu.mig import DeviceRef
from lockstep.exporters.scrape import PartialFailure
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.jobs.placement")


@dataclass(frozen=True, slots=True)
class Placement:
    gpu: str       # the GPU collector's index, "" where the device is not known here
    uuid: str      # GPU-... or MIG-..., "" where unknown
    job_id: str    # the job holding it in the node's mapping, "" where none does


NOWHERE = Placement("", "", "")


def bare_uuid(device: str) -> str:
    """A UUID without its ``GPU-``/``MIG-`` prefix, lower case: how NCCL's file names spell it."""
    lowered = device.strip().lower()
    return lowered[4:] if lowered.startswith(("gpu-", "mig-")) else lowered


class Placements:
    """``of(device) -> Placement``, from the job mapping's rows and the GPU backend's device ids, read at most
    once per ``max_age`` seconds."""

    def __init__(self, rows: Callable[[], Iterable[Sample]], refs: Callable[[], Mapping[str, DeviceRef]],
                 max_age: float) -> None:
        self.rows, self.refs, self.max_age = rows, refs, max_age
        self._by_id: dict[str, Placement] = {}
        self._read_at = -max_age

    def of(self, device: str) -> Placement:
        if time.monotonic() - self._read_at >= self.max_age:
            self._read_at = time.monotonic()
            self._by_id = self._read()
        return self._by_id.get(device) or self._by_id.get(bare_uuid(device)) or NOWHERE

    def _read(self) -> dict[str, Placement]:
        out: dict[str, Placement] = {}
        try:
            refs = dict(self.refs())
        except Exception as exc:
            once(log, logging.WARNING, "refs", "GPU device ids unavailable: %s", exc)
            refs = {}
        for device, ref in refs.items():
            place = Placement(ref.gpu, ref.uuid, "")
            out[device] = out[bare_uuid(device)] = place
        for gpu, uuid, job_id in self._jobs():
            place = Placement(gpu, uuid, job_id)
            for key in (uuid, bare_uuid(uuid)) if uuid else ():
                out[key] = place
            if gpu and (not uuid or out.get(gpu, place).uuid in ("", uuid)):
                out[gpu] = place   # an index names the whole GPU: not one of its MIG devices' jobs
        return out

    def _jobs(self) -> list[tuple[str, str, str]]:
        try:
            samples = list(self.rows())
        except PartialFailure as exc:
            samples = exc.samples
        except Exception as exc:
            once(log, logging.WARNING, "jobs", "job mapping unavailable: %s", exc)
            return []
        at = [gpu_metrics.JOB_INFO.labels.index(name) for name in ("gpu", "uuid", "job_id")]
        return [tuple(s.labels[i] for i in at) for s in samples if s.metric is gpu_metrics.JOB_INFO]
