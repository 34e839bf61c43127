"""Reads one ``GpuSnapshot`` per GPU through the ``Nvml`` Protocol (pynvml, the simulator, a fake).

Scalar counters come from one ``nvmlDeviceGetFieldValues`` batch per GPU; drivers without the field
API (FunctionNotFound) get the classic one-call-per-value functions instead. Every call goes through
``NvmlGuard``, so an unsupported value is absent and a lost GPU raises ``GpuLost``.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import pynvml

from lockstep.exporters.gpu.errors import NvmlGuard, error_code
from lockstep.exporters.gpu.mig import read_migs
from lockstep.exporters.gpu.protocol import Nvml
from lockstep.exporters.gpu.snapshot import GpuSnapshot, GpuStatic, NvLinkCounters

FIELDS = {
    "memory_temperature_c": pynvml.NVML_FI_DEV_MEMORY_TEMP,
    "power_instant_mw": pynvml.NVML_FI_DEV_POWER_INSTANT,   # instantaneous; nvmlDeviceGetPowerUsage is a 1 s average
    "energy_mj": pynvml.NVML_FI_DEV_ENERGY,
    "pcie_replay": pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
    "ecc_mode": pynvml.NVML_FI_DEV_ECC_CURRENT,
    "ecc_corrected": pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
    "ecc_uncorrected": pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
    "remapped_correctable": pynvml.NVML_FI_DEV_REMAPPED_COR,
    "remapped_uncorrectable": pynvml.NVML_FI_DEV_REMAPPED_UNC,
    "remapped_pending": pynvml.NVML_FI_DEV_REMAPPED_PENDING,
    "remapped_failed": pynvml.NVML_FI_DEV_REMAPPED_FAILURE,
    # Dynamic page retirement (Kepler to Turing; GPUs with row remapping answer NotSupported).
    "retired_sbe": pynvml.NVML_FI_DEV_RETIRED_SBE,
    "retired_dbe": pynvml.NVML_FI_DEV_RETIRED_DBE,
    "retired_pending": pynvml.NVML_FI_DEV_RETIRED_PENDING,
    # NVLink errors summed over links: four fields in the same batch instead of 18 links x 5 calls.
    "nvlink_replay": pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
    "nvlink_recovery": pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
    "nvlink_crc_flit": pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
    "nvlink_crc_data": pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
}
ANSWERED = "fields_answered"   # read_fields' key for the names a GPU answers
_NVLINK_TOTALS = ("nvlink_replay", "nvlink_recovery", "nvlink_crc_flit", "nvlink_crc_data")
_FIELD_IDS = list(FIELDS.values())
_FIELD_NAMES = tuple(FIELDS)
_NVLINK_COUNTERS = (pynvml.NVML_NVLINK_ERROR_DL_REPLAY, pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
                    pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA)
# pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,) through a stray comma; the C enum value is 0.
P2P_READ = 0


def read_static(nvml: Nvml, index: int, handles: Sequence[Any]) -> GpuStatic:
    g, h = NvmlGuard(index), handles[index]
    pci = g.call("nvmlDeviceGetPciInfo", nvml.nvmlDeviceGetPciInfo, h)
    p2p = tuple((peer, status) for peer, other in enumerate(handles) if peer != index and other is not None
                for status in [g.call("nvmlDeviceGetP2PStatus", nvml.nvmlDeviceGetP2PStatus, h, other, P2P_READ)]
                if status is not None)
    return GpuStatic(
        index=index, uuid=g.call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, h) or "",
        name=g.call("nvmlDeviceGetName", nvml.nvmlDeviceGetName, h) or "",
        pci_bus_id=pci.busId if pci is not None else "",
        minor=g.call("nvmlDeviceGetMinorNumber", nvml.nvmlDeviceGetMinorNumber, h),
        sm_clock_max_mhz=g.call("nvmlDeviceGetMaxClockInfo", nvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
        mem_clock_max_mhz=g.call("nvmlDeviceGetMaxClockInfo", nvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM),
        pcie_width_max=g.call("nvmlDeviceGetMaxPcieLinkWidth", nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        pcie_gen_max=g.call("nvmlDeviceGetMaxPcieLinkGeneration", nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        p2p=p2p, memory_v2=_answers(g, "nvmlDeviceGetMemoryInfo_v2", nvml.nvmlDeviceGetMemoryInfo, h,
                                    pynvml.nvmlMemory_v2),
        mig_capable=_answers(g, "nvmlDeviceGetMigMode", nvml.nvmlDeviceGetMigMode, h))


def _answers(g: NvmlGuard, what: str, fn: Any, *args: Any) -> bool:
    """Whether a call works on this GPU and driver at all (a static fact: an older driver lacks the
    symbol, a GPU without the feature says NotSupported until the driver changes)."""
    try:
        fn(*args)
    except pynvml.NVMLError as exc:
        g.failed(what, error_code(exc))  # raises GpuLost for a lost GPU
        return False
    return True


def read_snapshot(nvml: Nvml, static: GpuStatic, handle: Any, per_link: bool = False,
                  prof: tuple[tuple[str, float], ...] = ()) -> GpuSnapshot:
    """One scrape of one GPU; raises ``GpuLost`` if NVML reports it lost. NVLink errors are the
    all-links totals (link "total"), plus every active link's own counters with ``per_link``.
    ``prof``: the GPU's DCGM profiling fields, carried into the snapshot."""
    g, h = NvmlGuard(static.index), handle
    util = g.call("nvmlDeviceGetUtilizationRates", nvml.nvmlDeviceGetUtilizationRates, h)
    # v2 keeps the driver's reservation out of "used", as nvidia-smi and DCGM report it.
    mem = g.call("nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, h,
                 *((pynvml.nvmlMemory_v2,) if static.memory_v2 else ()))
    mig_mode = g.call("nvmlDeviceGetMigMode", nvml.nvmlDeviceGetMigMode, h) if static.mig_capable else None
    fields = read_fields(nvml, g, h, static.fields)
    answered = fields.pop(ANSWERED, None)
    totals = [fields.pop(key, None) for key in _NVLINK_TOTALS]
    nvlink = (NvLinkCounters("total", *totals),) if any(v is not None for v in totals) else ()
    nvlink_links = None
    if per_link:
        active, nvlink_links = read_nvlink(nvml, g, h)
        nvlink += active
    # Both: the instant reading for lockstep_gpu_power_watts, the 1 s average for dcgm-exporter's name.
    power_average = g.call("nvmlDeviceGetPowerUsage", nvml.nvmlDeviceGetPowerUsage, h)
    reasons = g.call("nvmlDeviceGetCurrentClocksEventReasons", nvml.nvmlDeviceGetCurrentClocksEventReasons, h)
    if reasons is None:  # drivers before 535 only have the older name
        reasons = g.call("nvmlDeviceGetCurrentClocksThrottleReasons",
                         nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    return GpuSnapshot(
        static=static,
        utilization_gpu=util.gpu if util is not None else None,
        utilization_memory=util.memory if util is not None else None,
        sm_clock_mhz=g.call("nvmlDeviceGetClockInfo", nvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
        mem_clock_mhz=g.call("nvmlDeviceGetClockInfo", nvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
        power_average_mw=power_average,
        power_limit_mw=g.call("nvmlDeviceGetEnforcedPowerLimit", nvml.nvmlDeviceGetEnforcedPowerLimit, h),
        temperature_c=g.call("nvmlDeviceGetTemperature", nvml.nvmlDeviceGetTemperature, h,
                             pynvml.NVML_TEMPERATURE_GPU),
        memory_used=mem.used if mem is not None else None,
        memory_free=mem.free if mem is not None else None,
        memory_total=mem.total if mem is not None else None,
        memory_reserved=mem.reserved if mem is not None and static.memory_v2 else None,
        clock_event_reasons=int(reasons) if reasons is not None else None,
        pcie_width=g.call("nvmlDeviceGetCurrPcieLinkWidth", nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_gen=g.call("nvmlDeviceGetCurrPcieLinkGeneration", nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        persistence_mode=g.call("nvmlDeviceGetPersistenceMode", nvml.nvmlDeviceGetPersistenceMode, h),
        mig_mode=mig_mode[0] if mig_mode is not None else None,
        migs=read_migs(nvml, g, h) if mig_mode is not None and mig_mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE else (),
        nvlink=nvlink,
        nvlink_links=nvlink_links or None,
        prof=prof,
        fields_answered=answered,
        **fields)


def read_fields(nvml: Nvml, g: NvmlGuard, h: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The batch's values by name. ``names``: those to ask for (the others are absent); None asks for all,
    and then the answer also holds, under ``ANSWERED``, the fields this GPU and driver answer at all: a field
    NotSupported (Hopper's retired pages) or unknown to the driver stays so until the driver changes, so the
    collector leaves it out of later batches."""
    if names is not None and not names:
        return {}
    try:
        values = nvml.nvmlDeviceGetFieldValues(h, _FIELD_IDS if names is None else _field_ids(names))
    except pynvml.NVMLError as exc:
        g.failed("nvmlDeviceGetFieldValues", error_code(exc))  # raises GpuLost for a lost GPU
        return read_fields_classic(nvml, g, h)
    if names is not None:
        return g.fields(names, values)
    out: dict[str, Any] = g.fields(_FIELD_NAMES, values)
    absent = g.static_absent(_FIELD_NAMES, values)
    out[ANSWERED] = tuple(name for name in _FIELD_NAMES if name not in absent)
    return out


@functools.lru_cache(maxsize=64)
def _field_ids(names: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(FIELDS[name] for name in names)


def read_fields_classic(nvml: Nvml, g: NvmlGuard, h: Any) -> dict[str, float | None]:
    """The same values one call each, for drivers without nvmlDeviceGetFieldValues."""
    ecc = g.call("nvmlDeviceGetEccMode", nvml.nvmlDeviceGetEccMode, h)
    rows = g.call("nvmlDeviceGetRemappedRows", nvml.nvmlDeviceGetRemappedRows, h) or (None,) * 4
    errors = nvml.nvmlDeviceGetTotalEccErrors
    return {
        "memory_temperature_c": None, "power_instant_mw": None,
        "energy_mj": g.call("nvmlDeviceGetTotalEnergyConsumption", nvml.nvmlDeviceGetTotalEnergyConsumption, h),
        "pcie_replay": g.call("nvmlDeviceGetPcieReplayCounter", nvml.nvmlDeviceGetPcieReplayCounter, h),
        "ecc_mode": ecc[0] if ecc is not None else None,
        "ecc_corrected": g.call("nvmlDeviceGetTotalEccErrors", errors, h,
                                pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC),
        "ecc_uncorrected": g.call("nvmlDeviceGetTotalEccErrors", errors, h,
                                  pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
        "remapped_correctable": rows[0], "remapped_uncorrectable": rows[1],
        "remapped_pending": rows[2], "remapped_failed": rows[3],
        **_retired_classic(nvml, g, h), **dict.fromkeys(_NVLINK_TOTALS),
    }


def _retired_classic(nvml: Nvml, g: NvmlGuard, h: Any) -> dict[str, float | None]:
    pages = nvml.nvmlDeviceGetRetiredPages
    sbe = g.call("nvmlDeviceGetRetiredPages", pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
    dbe = g.call("nvmlDeviceGetRetiredPages", pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    return {"retired_sbe": len(sbe) if sbe is not None else None, "retired_dbe": len(dbe) if dbe is not None else None,
            "retired_pending": g.call("nvmlDeviceGetRetiredPagesPendingStatus",
                                      nvml.nvmlDeviceGetRetiredPagesPendingStatus, h)}


def read_nvlink(nvml: Nvml, g: NvmlGuard, h: Any) -> tuple[tuple[NvLinkCounters, ...], int]:
    """Error counters of every active link, and how many links NVML knows on the GPU (active or not:
    the board's topology); the first link NVML rejects ends the scan."""
    links, known = [], 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        state = g.call("nvmlDeviceGetNvLinkState", nvml.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            break
        known += 1
        if state:
            links.append(NvLinkCounters(str(link), *_link_counters(nvml, g, h, link)))
    return tuple(links), known


def _link_counters(nvml: Nvml, g: NvmlGuard, h: Any, link: int) -> list[float | None]:
    # 18 links x 4 counters per H100: one try around the common all-supported case, the guard per
    # counter only when one of them fails.
    read = nvml.nvmlDeviceGetNvLinkErrorCounter
    try:
        return [read(h, link, c) for c in _NVLINK_COUNTERS]
    except pynvml.NVMLError:
        return [g.call("nvmlDeviceGetNvLinkErrorCounter", read, h, link, c) for c in _NVLINK_COUNTERS]
