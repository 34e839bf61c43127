"""``replay:FILE.xml`` backend: a real driver's ``nvidia-smi -q -x`` capture behind pynvml's API.

Each call returns what that driver returned (the values ``smi_xml`` parsed, in NVML's units and
pynvml's own return types), or raises pynvml's error class for what NVML refused: "N/A" is
NVMLError_NotSupported, a call the capture's driver predates is NVMLError_FunctionNotFound
(nvmlDeviceGetCurrentClocksEventReasons before R535, nvmlDeviceGetMemoryInfo_v2 before R510, the MIG
calls before R450). What ``nvidia-smi -q`` never prints (NVLink, P2P, energy, MIG UUIDs and slice
counts) is NotSupported: the collector then shows it absent, as it would for a GPU without it.
The capture's GPUs are indices 0..n-1 in file order; MIG devices get handles of their own.
"""
from __future__ import annotations

import ctypes
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import pynvml

from lockstep.exporters.gpu.smi_xml import NOT_CAPTURED, NotCaptured, Refused, SmiGpu, parse_smi_log

_FIELDS = {pynvml.NVML_FI_DEV_MEMORY_TEMP: "temp_memory", pynvml.NVML_FI_DEV_POWER_INSTANT: "power_instant",
           pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: "pcie_replay", pynvml.NVML_FI_DEV_ECC_CURRENT: "ecc_current",
           pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: "ecc_corrected", pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: "ecc_uncorrected",
           pynvml.NVML_FI_DEV_REMAPPED_COR: "remap_corr", pynvml.NVML_FI_DEV_REMAPPED_UNC: "remap_unc",
           pynvml.NVML_FI_DEV_REMAPPED_PENDING: "remap_pending", pynvml.NVML_FI_DEV_REMAPPED_FAILURE: "remap_failure",
           pynvml.NVML_FI_DEV_RETIRED_SBE: "retired_sbe", pynvml.NVML_FI_DEV_RETIRED_DBE: "retired_dbe",
           pynvml.NVML_FI_DEV_RETIRED_PENDING: "retired_pending"}
_CLOCKS = {pynvml.NVML_CLOCK_SM: "sm", pynvml.NVML_CLOCK_MEM: "mem"}
# Calls that answer one captured value of the GPU, as pynvml's ``fn(handle)``.
_SCALAR_CALLS = {
    "nvmlDeviceGetName": "name", "nvmlDeviceGetMinorNumber": "minor", "nvmlDeviceGetPersistenceMode": "persistence",
    "nvmlDeviceGetPowerUsage": "power_usage", "nvmlDeviceGetEnforcedPowerLimit": "power_limit",
    "nvmlDeviceGetCurrentClocksThrottleReasons": "clock_reasons", "nvmlDeviceGetPcieReplayCounter": "pcie_replay",
    "nvmlDeviceGetCurrPcieLinkWidth": "pcie_width", "nvmlDeviceGetMaxPcieLinkWidth": "pcie_width_max",
    "nvmlDeviceGetCurrPcieLinkGeneration": "pcie_gen", "nvmlDeviceGetMaxPcieLinkGeneration": "pcie_gen_max",
}


def _answer(value: Any) -> Any:
    if isinstance(value, Refused):
        raise pynvml.NVMLError(value.code)
    return value


def _scalar_call(name: str, key: str) -> Any:
    def call(self: "ReplayNvml", handle: Any) -> Any:
        return self._get(handle, key)
    call.__name__ = call.__qualname__ = name
    return call


def _key(handle: Any) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class ReplayNvml:
    """Also answers every call of ``_SCALAR_CALLS`` (set below the class)."""

    ANSWERS_IN_PYTHON = True   # holds the GIL throughout: the collector reads its GPUs one after another

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.log = parse_smi_log(self.path.read_text(), str(self.path))  # SmiFormatError names file and element
        # Distinct non-NULL device pointers, as nvmlDeviceGetHandleByIndex returns them.
        self._structs = [pynvml.struct_c_nvmlDevice_t() for _ in range(len(self.log.gpus) + sum(
            len(gpu.migs) for gpu in self.log.gpus))]
        handles = [pynvml.c_nvmlDevice_t(s) for s in self._structs]
        self._gpu_handles = handles[:len(self.log.gpus)]
        self._mig_handles: list[list[Any]] = []
        rest = iter(handles[len(self.log.gpus):])
        self._owner: dict[int, tuple[int, int | None]] = {_key(h): (i, None) for i, h in enumerate(self._gpu_handles)}
        for index, gpu in enumerate(self.log.gpus):
            migs = [next(rest) for _ in gpu.migs]
            self._mig_handles.append(migs)
            self._owner.update({_key(h): (index, m) for m, h in enumerate(migs)})

    # -- lookups -------------------------------------------------------------------------------
    def _where(self, handle: Any) -> tuple[int, int | None]:
        found = self._owner.get(_key(handle))
        if found is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return found

    def _gpu(self, handle: Any) -> SmiGpu:
        index, mig = self._where(handle)
        if mig is not None:  # a whole-GPU query on a MIG device handle
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.log.gpus[index]

    def _get(self, handle: Any, key: str) -> Any:
        return _answer(self._gpu(handle).values[key])

    def _mig(self, handle: Any) -> dict[str, Any]:
        index, mig = self._where(handle)
        if mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.log.gpus[index].migs[mig].values

    def _driver_before(self, major: int) -> bool:
        return int(self.log.driver_version.split(".")[0] or 0) < major

    # -- system and identity -------------------------------------------------------------------
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.log.driver_version

    def nvmlDeviceGetCount(self) -> int:
        return len(self.log.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if not 0 <= index < len(self._gpu_handles):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._gpu_handles[index]

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        if self._where(handle)[1] is not None:
            raise pynvml.NVMLError(NOT_CAPTURED.code)   # schema v12 prints no MIG device UUID
        return self._get(handle, "uuid")

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        info = pynvml.nvmlPciInfo_t()
        info.busId = self._get(handle, "pci_bus_id").encode()
        return info

    # -- per-scrape values ---------------------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu, memory = self._get(handle, "util_gpu"), self._get(handle, "util_memory")
        return pynvml.c_nvmlUtilization_t(gpu=gpu, memory=memory)

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        return self._get(handle, f"clock_{_CLOCKS[type]}") if type in _CLOCKS else _answer(NOT_CAPTURED)

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:
        return self._get(handle, f"max_clock_{_CLOCKS[type]}") if type in _CLOCKS else _answer(NOT_CAPTURED)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self._gpu(handle)
        return _answer(NOT_CAPTURED)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self._get(handle, "temp_gpu") if sensor == pynvml.NVML_TEMPERATURE_GPU else _answer(NOT_CAPTURED)

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """v1 ``used`` counts the driver's reservation (NVML: "sum of reserved and allocated"); v2 keeps
        it apart. A capture without <reserved> predates the v2 call (R510)."""
        mem = self._mig(handle) if self._where(handle)[1] is not None else self._gpu(handle).values
        total, used, free = _answer(mem["mem_total"]), _answer(mem["mem_used"]), _answer(mem["mem_free"])
        reserved = mem["mem_reserved"]
        if version:
            if isinstance(reserved, NotCaptured):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            return pynvml.c_nvmlMemory_v2_t(version=version, total=total, reserved=_answer(reserved), free=free,
                                            used=used)
        return pynvml.c_nvmlMemory_t(total=total, free=free,
                                     used=used + (0 if isinstance(reserved, Refused) else reserved))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        if self._gpu(handle).values["clock_reasons_api"] == "throttle":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return self._get(handle, "clock_reasons")

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        return [self._get(handle, "ecc_current"), self._get(handle, "ecc_pending")]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        if counterType != pynvml.NVML_VOLATILE_ECC:
            return _answer(NOT_CAPTURED)
        corrected = errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        return self._get(handle, "ecc_corrected" if corrected else "ecc_uncorrected")

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        return tuple(self._get(device, key) for key in ("remap_corr", "remap_unc", "remap_pending", "remap_failure"))

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        key = "retired_dbe" if sourceFilter == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else "retired_sbe"
        return [0] * self._get(device, key)   # nvidia-smi printed the count; the addresses are not used

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        return self._get(device, "retired_pending")

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        self._gpu(device)
        return _answer(NOT_CAPTURED)

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        self._gpu(device)
        return _answer(NOT_CAPTURED)

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        self._gpu(device1)
        return _answer(NOT_CAPTURED)

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: Sequence[int]) -> Any:
        values = self._gpu(handle).values
        out = (pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        for slot, field_id in zip(out, fieldIds):
            slot.fieldId = field_id
            answer = values.get(_FIELDS.get(field_id, ""), NOT_CAPTURED)
            if isinstance(answer, Refused):
                slot.nvmlReturn = answer.code
                continue
            slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            slot.value.ullVal = int(answer)
        return out

    # -- MIG -------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        values = self._gpu(device).values
        if self._driver_before(450):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return [_answer(values["mig_current"]), _answer(values["mig_pending"])]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        self.nvmlDeviceGetMigMode(device)
        return len(self._gpu(device).migs)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        self._gpu(device)
        migs = self._mig_handles[self._where(device)[0]]
        if not 0 <= index < len(migs):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return migs[index]

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        self._mig(migDevice)
        return self._gpu_handles[self._where(migDevice)[0]]

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        return _answer(self._mig(device)["gpu_instance_id"])

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        return _answer(self._mig(device)["compute_instance_id"])

    def nvmlDeviceGetAttributes(self, device: Any) -> Any:
        self._mig(device)
        return _answer(NOT_CAPTURED)   # slice counts are not in nvidia-smi -q

    # -- events: a capture has none; a wait times out as NVML's does ----------------------------
    def nvmlEventSetCreate(self) -> Any:
        return SimpleNamespace()

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        self._gpu(handle)

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        time.sleep(timeoutms / 1000)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        pass


for _name, _field in _SCALAR_CALLS.items():
    setattr(ReplayNvml, _name, _scalar_call(_name, _field))
