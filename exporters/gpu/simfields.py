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


# pynvml's structures override __setattr__/__getattribute__ in Python; the ctypes field descriptors set
# the same members in C (rebuilt for 8 GPUs x 15 fields on every simulator tick: 0.3 -> 0.1 ms).
_FIELD = pynvml.c_nvmlFieldValue_t
_SET_ID, _SET_RETURN, _SET_TYPE = _FIELD.fieldId.__set__, _FIELD.nvmlReturn.__set__, _FIELD.valueType.__set__
_GET_VALUE = _FIELD.value.__get__


def field_values(entry: dict, field_ids: Sequence[int]) -> Any:
    values = (_FIELD * len(field_ids))()
    for slot, field_id in zip(values, field_ids):
        _SET_ID(slot, field_id)
        value = _FIELDS.get(field_id, _absent)(entry)
        if value is _ABSENT:
            _SET_RETURN(slot, pynvml.NVML_ERROR_NOT_SUPPORTED)
            continue
        _SET_RETURN(slot, pynvml.NVML_SUCCESS)
        _SET_TYPE(slot, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG)
        _GET_VALUE(slot).ullVal = int(value)
    return values


def _absent(entry: dict) -> Any:
    return _ABSENT
