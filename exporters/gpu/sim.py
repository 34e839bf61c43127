"""``sim:PATH`` backend: the simulator's ``gpus.json`` (simulator/FORMATS.md) behind pynvml's API.

Same function names, return shapes and errors as pynvml: a key missing from a GPU's entry raises
NVMLError_NotSupported, a GPU with ``lost: true`` raises NVMLError_GPUIsLost, a link or peer beyond
the file raises NVMLError_InvalidArgument. ``xid_events`` are delivered through the event-set calls,
each ``seq`` once. The file is re-read when it changes (checked once per scrape, in nvmlDeviceGetCount).
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import pynvml

from lockstep.exporters.gpu.simevents import SimEvents
from lockstep.exporters.gpu.simfields import field_values

P2P_CODES = {"ok": pynvml.NVML_P2P_STATUS_OK, "chipset_not_supported": pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED,
             "gpu_not_supported": pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED,
             "topology_not_supported": pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED,
             "disabled_by_regkey": pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY,
             "not_supported": pynvml.NVML_P2P_STATUS_NOT_SUPPORTED, "unknown": pynvml.NVML_P2P_STATUS_UNKNOWN}
_NVLINK_KEYS = {pynvml.NVML_NVLINK_ERROR_DL_REPLAY: "replay", pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
                pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc_flit", pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA: "crc_data"}


class SimFormatError(ValueError):
    pass


def parse_gpus_json(text: str, path: str) -> dict[str, Any]:
    """Validate ``gpus.json``; errors name the file, line and key."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SimFormatError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise SimFormatError(f"{path}: gpus: missing or not a list")
    for i, gpu in enumerate(doc["gpus"]):
        for key, kind in (("index", int), ("uuid", str), ("name", str)):
            if not isinstance(gpu, dict) or not isinstance(gpu.get(key), kind):
                raise SimFormatError(f"{path}: gpus[{i}].{key}: missing or not {kind.__name__}")
        if gpu["index"] != i:
            raise SimFormatError(f"{path}: gpus[{i}].index: is {gpu['index']}, expected {i}")
    return doc


class SimNvml(SimEvents):
    ANSWERS_IN_PYTHON = True   # holds the GIL throughout: the collector reads its GPUs one after another

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._doc: dict[str, Any] = {"gpus": []}
        self._stamp: tuple[int, int] | None = None
        self.checked_at = 0.0  # time.monotonic() of the last refresh(), by the scrape or the XID thread
        self._lock = threading.Lock()
        self._handles: dict[int, SimpleNamespace] = {}  # one object per GPU, like NVML's handles
        self._fields: dict[tuple, Any] = {}  # field-value arrays of the loaded document (ctypes is slow)

    # -- file -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read the file if it changed; a missing file means no GPUs yet (simulator starting)."""
        self.checked_at = time.monotonic()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._doc, self._stamp = {"gpus": []}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._doc = parse_gpus_json(self.path.read_text(), str(self.path))
                self._stamp = stamp
                self._fields = {}

    def document(self) -> dict[str, Any]:
        return self._doc

    def gpu(self, handle: Any, key: str | None = None) -> Any:
        entry = self._doc["gpus"][handle.index] if handle.index < len(self._doc["gpus"]) else None
        if entry is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)  # vanished from the file
        if entry.get("lost"):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if key is None:
            return entry
        value = entry.get(key)
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    def _sub(self, handle: Any, key: str, sub: str) -> Any:
        value = self.gpu(handle, key).get(sub)
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    # -- system and identity -------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.refresh()

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._doc.get("driver_version", ""))

    def nvmlDeviceGetCount(self) -> int:
        self.refresh()
        return len(self._doc["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if not 0 <= index < len(self._doc["gpus"]):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handles.setdefault(index, SimpleNamespace(index=index))

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self.gpu(handle, "uuid")

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self.gpu(handle, "name")

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        return SimpleNamespace(busId=self.gpu(handle, "pci_bus_id"))

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        self.gpu(handle)
        return handle.index

    # -- per-scrape values ---------------------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        util = self.gpu(handle, "utilization")
        return pynvml.c_nvmlUtilization_t(gpu=util["gpu"], memory=util["memory"])

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        return self._sub(handle, "clocks_mhz", "sm" if type == pynvml.NVML_CLOCK_SM else "mem")

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:
        return self._sub(handle, "max_clocks_mhz", "sm" if type == pynvml.NVML_CLOCK_SM else "mem")

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self.gpu(handle, "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self.gpu(handle, "power_limit_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self.gpu(handle, "energy_mj")

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self.gpu(handle, "temperature_c")

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        mem = self.gpu(handle, "memory")
        if version:  # gpus.json has no driver reservation: v2 is not answered, the collector reads v1
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.c_nvmlMemory_t(total=mem["total"], free=mem["total"] - mem["used"], used=mem["used"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self.gpu(handle, "clock_event_reasons")

    nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        mode = self.gpu(handle, "ecc_mode")
        return [mode, mode]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        kind = "corrected" if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else "uncorrected"
        return self._sub(handle, "ecc", kind)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        rows = self.gpu(device, "remapped_rows")
        return (rows["correctable"], rows["uncorrectable"], int(rows["pending"]), int(rows["failed"]))

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        return self._unsupported(device)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        return self._unsupported(device)

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        self.gpu(device)   # H100s can run MIG; the simulated ones have it disabled, as NVML says then
        return [pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_DISABLE]

    def _unsupported(self, handle: Any) -> Any:
        self.gpu(handle)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return self._sub(handle, "pcie", "replay")

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._sub(handle, "pcie", "width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._sub(handle, "pcie", "max_width")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._sub(handle, "pcie", "gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._sub(handle, "pcie", "max_gen")

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        links = self.gpu(device, "nvlink")
        if link >= len(links):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        links = self.gpu(device, "nvlink")
        if link >= len(links) or counter not in _NVLINK_KEYS:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return links[link][_NVLINK_KEYS[counter]]

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return self.gpu(handle, "persistence_mode")

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        status = self.gpu(device1, "p2p").get(str(device2.index))
        if status is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return P2P_CODES.get(status, pynvml.NVML_P2P_STATUS_UNKNOWN)

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: Sequence[int]) -> Any:
        entry = self.gpu(handle)
        key = (handle.index, tuple(fieldIds))
        cached = self._fields.get(key)
        if cached is None or cached[0] is not entry:  # the XID thread may have reloaded the file meanwhile
            cached = self._fields[key] = (entry, field_values(entry, fieldIds))
        return cached[1]
