"""XID events of the simulator backend through pynvml's event-set calls: each ``xid_events`` entry
of gpus.json is delivered once per event set (by ``seq``), so a repeated XID is counted again."""
from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pynvml

# How often a wait re-reads gpus.json for new events, unless a scrape checked it within POLL_S (the
# wait then looks at the scrape's copy). Each re-read of a changed file parses ~16 kB of JSON (~0.5 ms).
# Against the simulator at 60x, re-reading at 4 Hz cost ~3 ms of CPU per second with no scrapes (now
# ~0.9), and 0.23 ms per scrape at one scrape per tick (now 0.02). An XID still counts within POLL_S.
POLL_S = 1.0


class SimEvents:
    """Mixed into ``SimNvml``: uses its ``document()``, ``refresh()``, ``checked_at`` and handles."""

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
            if time.monotonic() - self.checked_at < POLL_S:
                continue
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
