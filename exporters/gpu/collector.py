"""The GPU collector: one snapshot of each GPU per scrape through the ``Nvml`` Protocol, XID counts
from the event thread, optional DCGM profiling fields and health watches, dcgm-exporter names, and
the per-GPU verdict (``health.py``).

NVML missing (no driver, no library) means no GPU samples, ``lockstep_node_gpus_visible 0`` and a
warning once; NVML is retried every ``RETRY_INIT_S``. A lost GPU is reported ``lockstep_gpu_up 0``
and the others carry on.

The GPUs are read side by side (``readers.py``: NVML is thread-safe and pynvml releases the GIL in
each call; a backend that answers in Python, ``ANSWERS_IN_PYTHON``, is read one GPU after another), each in
its own task: a GPU that raises loses only its own samples, and one whose NVML
call has not returned within ``--gpu.read-timeout`` is reported down (``lockstep_gpu_up 0``, the bus
check failed) while the others are reported; it is not read again until that call returns, so a
wedged GPU holds one reader, never the pool.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import Future, wait
from typing import Any, Mapping

import pynvml

from lockstep.exporters.catalog import gpu as m
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.dcgm_names import dcgm_labels, dcgm_samples
from lockstep.exporters.gpu.errors import GpuLost, NvmlGuard, error_code
from lockstep.exporters.gpu.expected import slurm_gpu_count
from lockstep.exporters.gpu.health import HealthTracker, health_samples
from lockstep.exporters.gpu.protocol import Nvml, ProfSource
from lockstep.exporters.gpu.read import read_snapshot, read_static
from lockstep.exporters.gpu.readers import ReaderPool
from lockstep.exporters.gpu.samples import identity_samples, snapshot_samples
from lockstep.exporters.gpu.snapshot import GpuStatic
from lockstep.exporters.gpu.xid import XidWatcher, xid_samples
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.gpu")
RETRY_INIT_S = 60.0


class GpuCollector:
    def __init__(self, nvml: Nvml, prof: ProfSource | None, options: GpuOptions, watch_xid: bool = True) -> None:
        self.nvml, self.prof, self.options, self.watch_xid = nvml, prof, options, watch_xid
        self._initialized = False
        self._retry_at = 0.0
        self._driver = ""
        self._handles: list[Any] = []
        self._static: dict[int, GpuStatic] = {}
        self._dcgm_labels: dict[int, tuple[str, ...]] = {}
        self._xid: XidWatcher | None = None
        self._health = HealthTracker()
        # A backend answering in Python (the simulator, a replayed capture) holds the GIL for its whole call:
        # its GPUs read side by side would only take turns, and the pool would add ~60 µs of CPU per GPU.
        in_python = getattr(nvml, "ANSWERS_IN_PYTHON", False)
        self._pool = ReaderPool(options.readers) if options.readers > 1 and not in_python else None
        self._inflight: dict[int, Future] = {}   # each GPU's read still running from an earlier scrape
        expected = options.expected_count
        self._expected = slurm_gpu_count(options.hostname) if expected == "slurm" else expected

    def collect(self) -> list[Sample]:
        if not self._init():
            return self._node(0)
        count = self.nvml.nvmlDeviceGetCount()
        if count != len(self._handles):
            self._open_devices(count)
        prof = self._read_prof()
        dcgm_health = self._read_prof(health=True)
        samples = self._read_all(count, prof, dcgm_health)
        if self._xid is not None:
            samples += xid_samples(self._xid.counts())
        return samples + self._node(count)

    def _read_all(self, count: int, prof: Mapping[int, Any], dcgm_health: Mapping[int, Any]) -> list[Sample]:
        if self._pool is None:
            return [s for index in range(count) for s in self._gpu(index, prof.get(index), dcgm_health.get(index, {}))]
        started: dict[int, Future] = {}
        for index in range(count):
            running = self._inflight.get(index)
            if running is not None and not running.done():
                continue   # still inside NVML since an earlier scrape: not asked again
            started[index] = self._inflight[index] = self._pool.submit(
                self._gpu, index, prof.get(index), dcgm_health.get(index, {}))
        wait(started.values(), timeout=self.options.read_timeout_s)
        samples: list[Sample] = []
        for index in range(count):
            future = started.get(index)
            if future is None or not future.done():
                samples += self._unanswered(index)
                continue
            try:
                samples += future.result()
            except Exception as exc:  # a bug or a malformed answer for one GPU must not blank the others
                once(log, logging.ERROR, f"read:{index}:{type(exc).__name__}", "gpu %d: reading failed (%s: %s); "
                     "reported down", index, type(exc).__name__, exc)
                samples += self._down(index, self._static.get(index))
        return samples

    def _unanswered(self, index: int) -> list[Sample]:
        once(log, logging.WARNING, f"hung:{index}", "gpu %d: NVML has not answered within %gs; reported down "
             "until its call returns", index, self.options.read_timeout_s)
        return self._down(index, self._static.get(index))

    def _down(self, index: int, static: GpuStatic | None, dcgm_health: Mapping[str, int] | None = None) -> list[Sample]:
        verdict = health_samples(str(index), {**self._health.lost(index, self._xid_level(index)), **(dcgm_health or {})})
        if static is None:
            return [Sample(m.UP, (str(index),), 0.0), *verdict]
        return [*identity_samples(static, self._driver, up=False), *verdict]

    def _node(self, visible: int) -> list[Sample]:
        samples = [Sample(m.GPUS_VISIBLE, (), float(visible))]
        if self._expected is not None:
            samples.append(Sample(m.GPUS_EXPECTED, (), float(self._expected)))
        return samples

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._xid is not None:
            self._xid.close()
        if self.prof is not None:
            self.prof.close()
        if self._initialized:
            try:
                self.nvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    def _init(self) -> bool:
        if self._initialized:
            return True
        if time.monotonic() < self._retry_at:
            return False
        try:
            self.nvml.nvmlInit()
        except pynvml.NVMLError as exc:
            once(log, logging.WARNING, f"init:{error_code(exc)}", "NVML unavailable (%s); the GPU collector "
                 "reports no data and retries every %ds", exc, int(RETRY_INIT_S))
            self._retry_at = time.monotonic() + RETRY_INIT_S
            return False
        self._initialized = True
        try:
            self._driver = self.nvml.nvmlSystemGetDriverVersion()
        except pynvml.NVMLError:  # only a label; the GPUs may still answer
            self._driver = ""
        return True

    def _open_devices(self, count: int) -> None:
        """(Re)build the handle list: at start, and when the simulator's GPU count changes."""
        self._handles = [self._handle(index) for index in range(count)]
        self._static.clear()
        self._dcgm_labels.clear()
        if self._xid is not None:
            self._xid.close()
            self._xid = None
        if self.watch_xid and count:
            self._xid = XidWatcher(self.nvml, self._handles)

    def _handle(self, index: int) -> Any:
        try:
            return NvmlGuard(index).call("nvmlDeviceGetHandleByIndex", self.nvml.nvmlDeviceGetHandleByIndex, index)
        except GpuLost:
            return None

    def _late_handle(self, index: int) -> Any:
        """The handle of a GPU that had none at start (lost, or refused then), and its XID events from now on."""
        handle = NvmlGuard(index).call("nvmlDeviceGetHandleByIndex", self.nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            raise GpuLost(index, "nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NOT_FOUND)
        self._handles[index] = handle
        if self._xid is not None:
            self._xid.add(index, handle)
        return handle

    def _read_prof(self, health: bool = False) -> Mapping[int, Mapping[str, Any]]:
        """DCGM's profiling fields, or its health-watch verdicts per GPU."""
        read = getattr(self.prof, "health" if health else "read", None)
        if read is None:
            return {}
        try:
            return read()
        except Exception as exc:  # DCGM is extra: its failure must not hide the NVML fields
            once(log, logging.WARNING, f"prof:{health}:{type(exc).__name__}", "DCGM %s unavailable: %s",
                 "health watches" if health else "profiling fields", exc)
            return {}

    def _xid_level(self, index: int) -> int | None:
        if self._xid is None:
            return None
        return self._xid.worst_since(index, time.monotonic() - self.options.xid_window_s)

    def _gpu(self, index: int, prof: Mapping[str, float] | None, dcgm_health: Mapping[str, int]) -> list[Sample]:
        static = self._static.get(index)
        try:
            handle = self._handles[index]
            if handle is None:
                handle = self._late_handle(index)
            if static is None:
                static = self._static[index] = read_static(self.nvml, index, self._handles)
            # prof goes in at construction: dataclasses.replace() afterwards cost ~15 µs per GPU.
            snap = read_snapshot(self.nvml, static, handle, self.options.nvlink_per_link,
                                 tuple(sorted(prof.items())) if prof else ())
        except GpuLost as exc:
            once(log, logging.WARNING, f"lost:{index}:{static.uuid if static else ''}", "%s", exc)
            return self._down(index, static, dcgm_health)
        if snap.fields_answered is not None:  # later scrapes ask only for the fields this GPU answers at all
            self._static[index] = dataclasses.replace(static, fields=snap.fields_answered)
        samples = list(identity_samples(static, self._driver, up=True))
        samples += snapshot_samples(snap)
        checks = self._health.verdict(snap, time.monotonic(), self._xid_level(index))
        samples += health_samples(str(index), {**checks, **dcgm_health})
        if self.options.dcgm_names:
            labels = self._dcgm_labels.get(index)
            if labels is None:
                labels = self._dcgm_labels[index] = dcgm_labels(static, self._driver, self.options.hostname)
            samples += dcgm_samples(snap, labels, self._xid.last(index) if self._xid else 0)
        return samples
