"""``nvmlDeviceGetFieldValues`` for the simulator: real ``c_nvmlFieldValue_t`` results from one
``gpus.json`` GPU entry, with a per-field ``nvmlReturn`` as NVML gives it."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import pynvml

from lockstep.exporters.gpu.errors import batch_layout

_ABSENT = object()


def _path(*keys: str) -> Callable[[dict], Any]:
    def get(entry: dict) -> Any:
        value: Any = entry
        for key in keys:
            if not isinstance(value, dict) or value.get(key) is None:
                return _ABSENT
            value = value[key]
        return value
    return get


def _links_total(key: str) -> Callable[[dict], Any]:
    """NVML's *_TOTAL NVLink fields: the sum over the GPU's links (NotSupported without NVLink)."""
    def get(entry: dict) -> Any:
        links = entry.get("nvlink")
        # a list, not a generator: half the time (4 sums over 18 links per GPU per simulator tick)
        return sum([link.get(key, 0) for link in links]) if links else _ABSENT
    return get


_FIELDS: dict[int, Callable[[dict], Any]] = {
    pynvml.NVML_FI_DEV_MEMORY_TEMP: _path("memory_temperature_c"),
    pynvml.NVML_FI_DEV_POWER_INSTANT: _path("power_mw"),
    pynvml.NVML_FI_DEV_ENERGY: _path("energy_mj"),
    pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: _path("pcie", "replay"),
    pynvml.NVML_FI_DEV_ECC_CURRENT: _path("ecc_mode"),
    pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: _path("ecc", "corrected"),
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: _path("ecc", "uncorrected"),
    pynvml.NVML_FI_DEV_REMAPPED_COR: _path("remapped_rows", "correctable"),
    pynvml.NVML_FI_DEV_REMAPPED_UNC: _path("remapped_rows", "uncorrectable"),
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: _path("remapped_rows", "pending"),
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: _path("remapped_rows", "failed"),
    pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: _links_total("replay"),
    pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: _links_total("recovery"),
    pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: _links_total("crc_flit"),
    pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: _links_total("crc_data"),
}


# One struct call fills the whole array in C, the layout NvmlGuard.fields reads it with (setting each slot's
# members through ctypes cost ~2 µs per field: 8 GPUs x 19 fields rebuilt on every simulator tick).
_FIELD = pynvml.c_nvmlFieldValue_t
_NOT_SUPPORTED, _SUCCESS, _ULL = (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_SUCCESS,
                                  pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG)
_U64 = (1 << 64) - 1   # an unsigned long long, as ctypes would have stored it


def field_values(entry: dict, field_ids: Sequence[int]) -> Any:
    flat: list[int] = []
    for field_id in field_ids:
        value = _FIELDS.get(field_id, _absent)(entry)
        if value is _ABSENT:   # fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, value
            flat += (field_id, 0, 0, 0, 0, _NOT_SUPPORTED, 0)
        else:
            flat += (field_id, 0, 0, 0, _ULL, _SUCCESS, int(value) & _U64)
    values = (_FIELD * len(field_ids))()
    layout = batch_layout(len(field_ids))
    if layout is None:   # a pynvml whose structure differs: set each member
        for slot, (field_id, _, _, _, kind, code, value) in zip(values, zip(*[iter(flat)] * 7)):
            slot.fieldId, slot.valueType, slot.nvmlReturn = field_id, kind, code
            slot.value.ullVal = value
    elif field_ids:
        layout.pack_into(values, 0, *flat)
    return values


def _absent(entry: dict) -> Any:
    return _ABSENT
