"""XID events of the simulator backend through pynvml's event-set calls: each ``xid_events`` entry
of gpus.json is delivered once per event set (by ``seq``), so a repeated XID is counted again."""
from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pynvml

# How often a wait re-reads gpus.json for new events. The simulator writes a tick every sample period
# (seconds); polling at 20 Hz cost the idle agent ~2.5 ms of CPU per second, 10x a scrape per 15 s interval.
POLL_S = 0.25


class SimEvents:
    """Mixed into ``SimNvml``: uses its ``document()``, ``refresh()`` and handles."""

    def nvmlEventSetCreate(self) -> Any:
        return SimpleNamespace(gpus=set(), delivered=set())

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        if eventTypes & pynvml.nvmlEventTypeXidCriticalError:
            eventSet.gpus.add(handle.index)

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        """The next undelivered XID event of a registered GPU; NVMLError_Timeout after ``timeoutms``."""
        deadline = time.monotonic() + timeoutms / 1000
        while True:
            event = self._next_event(eventSet)
            if event is not None:
                return event
            if time.monotonic() >= deadline:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
            try:
                self.refresh()
            except ValueError:  # SimFormatError: reported by the scrape; keep the last good state here
                pass

    def _next_event(self, eventSet: Any) -> Any:
        for entry in self.document()["gpus"]:
            if entry["index"] not in eventSet.gpus:
                continue
            for event in entry.get("xid_events") or ():
                key = (entry["index"], event["seq"])
                if key not in eventSet.delivered:
                    eventSet.delivered.add(key)
                    return SimpleNamespace(device=self.nvmlDeviceGetHandleByIndex(entry["index"]),
                                           eventType=pynvml.nvmlEventTypeXidCriticalError,
                                           eventData=event["xid"], gpuInstanceId=0, computeInstanceId=0)
        return None

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        pass
