"""Counts XID errors from NVML events (``nvmlEventTypeXidCriticalError``) in a background thread.

DCGM's XID field holds only the last value, so a repeated XID is invisible there; NVML delivers
every event, so ``lockstep_gpu_xid_errors_total`` counts repeats. Each event is counted, but one
(gpu, xid) is logged at most once per ``LOG_INTERVAL_S`` with how often it repeated meanwhile: a
GPU in trouble can raise the same XID thousands of times a minute (NVSentinel #1120: 800,000 log
lines for 29 distinct XIDs). The thread survives any NVML error (logged once, retried after a
pause) and stops within one wait timeout on ``close()``.
"""
from __future__ import annotations

import ctypes
import logging
import threading
import time
from typing import Any, Sequence

import pynvml

from lockstep.exporters.catalog import gpu as m
from lockstep.exporters.catalog.enums import (
    HEALTH_FAILED,
    HEALTH_OK,
    HEALTH_WARNING,
    XID_CRITICAL,
    XID_INFO,
    XID_WARNING,
)
from lockstep.exporters.catalog.xid import lookup
from lockstep.exporters.gpu.errors import error_code
from lockstep.exporters.gpu.protocol import Nvml
from lockstep.exporters.toolkit.logs import kv, once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.gpu.xid")
WAIT_MS = 500
RETRY_S = 5.0
LOG_INTERVAL_S = 60.0
# An XID's severity as a level of the xid health check.
_LEVELS = {XID_INFO: HEALTH_OK, XID_WARNING: HEALTH_WARNING, XID_CRITICAL: HEALTH_FAILED}


def handle_key(handle: Any) -> int:
    """A hashable identity for a device handle: the C pointer for pynvml's handles (the event's copy
    points at the same device), the object itself for Python-level backends."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or id(handle)
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


class XidWatcher:
    def __init__(self, nvml: Nvml, handles: Sequence[Any]) -> None:
        self._nvml = nvml
        # Owned by the event thread: every event set registers these, events map back through _gpus.
        self._handles = {i: h for i, h in enumerate(handles) if h is not None}
        self._gpus = {handle_key(h): i for i, h in self._handles.items()}
        self._added: list[tuple[int, Any]] = []   # from add(), for the event thread to take
        self._counts: dict[tuple[int, int], int] = {}
        self._last: dict[int, int] = {}
        self._logged: dict[tuple[int, int], tuple[float, int]] = {}   # (gpu, xid) → (logged at, count then)
        self._seen_at: dict[tuple[int, int], float] = {}              # (gpu, xid) → monotonic time of the last event
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lockstep-gpu-xid", daemon=True)
        self._thread.start()

    def counts(self) -> dict[tuple[int, int], int]:
        """``{(gpu, xid): events}`` since the agent started."""
        with self._lock:
            return dict(self._counts)

    def last(self, gpu: int) -> int:
        with self._lock:
            return self._last.get(gpu, 0)

    def worst_since(self, gpu: int, since: float) -> int:
        """The verdict level of the XIDs ``gpu`` raised after monotonic time ``since``: 2 for a critical
        one, 1 for a warning, 0 for none or only informational ones."""
        with self._lock:
            codes = [xid for (g, xid), at in self._seen_at.items() if g == gpu and at > since]
        return max((_LEVELS[lookup(xid).severity] for xid in codes), default=0)

    def add(self, gpu: int, handle: Any) -> None:
        """Watch a GPU whose handle was missing when the watcher started. The event thread registers it
        before its next wait (within ``WAIT_MS``) on the event set it already has, so the other GPUs stay
        watched and the counts are kept; only that thread touches the event set (NVML does not document
        registering on a set another thread is waiting on)."""
        with self._lock:
            self._added.append((gpu, handle))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT_MS / 1000 + 2)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event_set = self._register()
            except pynvml.NVMLError as exc:
                once(log, logging.WARNING, f"register:{error_code(exc)}", "XID events unavailable (NVML error %d)",
                     error_code(exc))
                self._stop.wait(RETRY_S)
                continue
            try:
                self._wait_loop(event_set)
            except Exception as exc:  # anything else (a malformed simulated event) would end counting for good
                once(log, logging.ERROR, f"wait:{type(exc).__name__}", "XID event wait failed (%s: %s); "
                     "re-registering every %ds", type(exc).__name__, exc, int(RETRY_S))
                self._stop.wait(RETRY_S)
            finally:
                try:
                    self._nvml.nvmlEventSetFree(event_set)
                except pynvml.NVMLError:
                    pass

    def _register(self) -> Any:
        event_set = self._nvml.nvmlEventSetCreate()
        for index, handle in self._handles.items():
            self._register_gpu(event_set, index, handle)
        return event_set

    def _register_gpu(self, event_set: Any, index: int, handle: Any) -> None:
        try:
            self._nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
        except pynvml.NVMLError as exc:  # NotSupported on this GPU, or lost: watch the others
            once(log, logging.DEBUG, f"gpu{index}:{error_code(exc)}", "gpu %d: no XID events (NVML error %d)",
                 index, error_code(exc))

    def _register_added(self, event_set: Any) -> None:
        with self._lock:
            added, self._added = self._added, []
        for index, handle in added:
            self._handles[index] = handle
            self._gpus[handle_key(handle)] = index
            self._register_gpu(event_set, index, handle)

    def _wait_loop(self, event_set: Any) -> None:
        while not self._stop.is_set():
            if self._added:  # unlocked peek; taken under the lock
                self._register_added(event_set)
            try:
                data = self._nvml.nvmlEventSetWait(event_set, WAIT_MS)
            except pynvml.NVMLError as exc:
                if error_code(exc) == pynvml.NVML_ERROR_TIMEOUT:
                    continue
                log.warning("XID event wait failed; re-registering", extra=kv(err=str(exc)))
                self._stop.wait(RETRY_S)
                return
            if data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                self._count(data.device, int(data.eventData))

    def _count(self, device: Any, xid: int) -> None:
        gpu = self._gpus.get(handle_key(device))
        if gpu is None:
            return
        key = (gpu, xid)
        now = time.monotonic()
        with self._lock:
            count = self._counts[key] = self._counts.get(key, 0) + 1
            self._last[gpu] = xid
            self._seen_at[key] = now
        logged_at, logged_count = self._logged.get(key, (float("-inf"), 0))
        if now - logged_at >= LOG_INTERVAL_S:
            self._logged[key] = (now, count)
            entry = lookup(xid)
            log.log(logging.ERROR if entry.severity == XID_CRITICAL else logging.WARNING, "GPU XID error",
                    extra=kv(gpu=gpu, xid=xid, severity=entry.severity, category=entry.category, action=entry.action,
                             repeats_since_last_log=count - logged_count - 1, total=count))


def xid_samples(counts: dict[tuple[int, int], int]) -> list[Sample]:
    """``lockstep_gpu_xid_errors_total`` with each code's severity, category and action from the catalog."""
    out = []
    for (gpu, xid), events in sorted(counts.items()):
        entry = lookup(xid)
        out.append(Sample(m.XID_ERRORS, (str(gpu), str(xid), entry.severity, entry.category, entry.action),
                          float(events)))
    return out
