"""``nvmlDeviceGetFieldValues`` for the simulator: real ``c_nvmlFieldValue_t`` results from one
``gpus.json`` GPU entry, with a per-field ``nvmlReturn`` as NVML gives it."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import pynvml

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
        return sum(link.get(key, 0) for link in links) if links else _ABSENT
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


def field_values(entry: dict, field_ids: Sequence[int]) -> Any:
    values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
    for slot, field_id in zip(values, field_ids):
        slot.fieldId = field_id
        value = _FIELDS.get(field_id, lambda e: _ABSENT)(entry)
        if value is _ABSENT:
            slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            continue
        slot.nvmlReturn = pynvml.NVML_SUCCESS
        slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        slot.value.ullVal = int(value)
    return values
