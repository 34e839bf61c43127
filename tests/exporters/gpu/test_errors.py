"""``NvmlGuard.fields``: one nvmlDeviceGetFieldValues batch read at once, each value in its own C type,
absent fields None, a lost GPU raised; a sequence of structures (not one ctypes array) read field by field."""
from __future__ import annotations

import pynvml
import pytest

from lockstep.exporters.gpu.errors import GpuLost, NvmlGuard


def batch(*slots: tuple[int, int, str, object]):
    """A ctypes array as pynvml returns it: (nvmlReturn, valueType, union member, value) per slot."""
    values = (pynvml.c_nvmlFieldValue_t * len(slots))()
    for slot, (code, kind, member, value) in zip(values, slots):
        slot.nvmlReturn, slot.valueType = code, kind
        if member:
            setattr(slot.value, member, value)
    return values


MIXED = batch((pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", 2**40 + 7),
              (pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_DOUBLE, "dVal", 41.5),
              (pynvml.NVML_ERROR_NOT_SUPPORTED, 0, "", None),
              (pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG, "sllVal", -3),
              (pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", 7))
NAMES = ("energy", "temp", "retired", "signed", "width")
EXPECTED = {"energy": 1099511627783.0, "temp": 41.5, "retired": None, "signed": -3.0, "width": 7.0}


def test_a_batch_reads_every_value_in_its_own_type():
    assert NvmlGuard(0).fields(NAMES, MIXED) == EXPECTED


def test_a_list_of_structures_reads_the_same():
    assert NvmlGuard(0).fields(NAMES, list(MIXED)) == EXPECTED


def test_a_lost_gpu_in_a_batch_raises():
    values = batch((pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", 1),
                   (pynvml.NVML_ERROR_GPU_IS_LOST, 0, "", None))
    with pytest.raises(GpuLost, match="GPU 3 lost"):
        NvmlGuard(3).fields(("a", "b"), values)
