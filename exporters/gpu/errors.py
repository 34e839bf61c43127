"""The one place NVML errors are interpreted (docs/style.md, rule 7).

NVML reports failure per call (an ``NVMLError`` subclass) or per field (``nvmlReturn`` of a field value).
Both go through ``NvmlGuard``: unsupported features become ``None`` (absent, not zero) with one debug
line; a lost GPU aborts that GPU's snapshot only; anything else is logged once and treated as absent.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import struct
from typing import Any, Callable, Sequence

import pynvml

from lockstep.exporters.toolkit.logs import once

log = logging.getLogger("lockstep.gpu")

# Absent on this GPU/driver: NotSupported (feature), FunctionNotFound (older driver than the bindings),
# NoPermission (e.g. some counters need root), NotFound / InvalidArgument (no such link or peer),
# Deprecated (newer drivers retire some queries: nvidia-smi prints "Requested functionality has been
# deprecated" for them), ArgumentVersionMismatch (a versioned struct newer than the driver).
_ABSENT = {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NO_PERMISSION,
           pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NO_DATA,
           pynvml.NVML_ERROR_DEPRECATED, pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH}
# Of those, the answers that hold until the driver changes (not NoPermission, NotFound or NoData).
_STATICALLY_ABSENT = {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
                      pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_DEPRECATED,
                      pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH}
# The GPU itself is gone or wedged (fell off the bus, XID 79; Unknown is what a wedged GPU returns).
_LOST = {pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_RESET_REQUIRED}
# NVML itself is unusable on this host: no driver, no library, mismatched library.
UNAVAILABLE = {pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
               pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, pynvml.NVML_ERROR_UNINITIALIZED}


class GpuLost(Exception):
    """Raised out of a snapshot when NVML says the GPU is lost; the collector reports it down."""

    def __init__(self, gpu: int, what: str, code: int) -> None:
        super().__init__(f"GPU {gpu} lost ({what}: NVML error {code})")
        self.gpu, self.code = gpu, code


def error_code(exc: BaseException) -> int:
    return getattr(exc, "value", pynvml.NVML_ERROR_UNKNOWN)


class NvmlGuard:
    """Runs NVML calls for one GPU and turns their errors into absent values or ``GpuLost``."""

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or None when NVML says the value is absent; raises GpuLost."""
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            return self.failed(what, error_code(exc))

    def failed(self, what: str, code: int) -> None:
        """Classify NVML return ``code`` for ``what`` (a function or field name)."""
        if code in _LOST:
            raise GpuLost(self.gpu, what, code)
        if code in _ABSENT:
            once(log, logging.DEBUG, f"absent:{what}:{self.gpu}", "gpu %d: %s not available (NVML error %d)",
                 self.gpu, what, code)
        else:
            once(log, logging.WARNING, f"error:{what}:{code}", "gpu %d: %s failed with NVML error %d (%s)",
                 self.gpu, what, code, pynvml.NVMLError(code))
        return None

    def field(self, what: str, value: Any) -> float | None:
        """The number in one ``c_nvmlFieldValue_t`` from nvmlDeviceGetFieldValues, or None."""
        code = _FIELD_RETURN(value)
        if code != pynvml.NVML_SUCCESS:
            return self.failed(what, code)
        return float(getattr(_FIELD_VALUE(value), _VALUE_MEMBER.get(_FIELD_TYPE(value), "ullVal")))

    def fields(self, names: Sequence[str], values: Any) -> dict[str, float | None]:
        """``field`` for a whole nvmlDeviceGetFieldValues batch (``names`` in the order of ``values``). A
        ctypes array (what pynvml returns) is unpacked in one ``struct`` call: reading its members through
        ctypes built a Python object per slot and per union, ~0.5 µs per field, 19 fields per GPU."""
        layout = batch_layout(len(values))
        try:
            flat = layout.unpack_from(values) if layout is not None else None
        except TypeError:   # a sequence of structures rather than one array
            flat = None
        if flat is None:
            return {name: self.field(name, value) for name, value in zip(names, values)}
        out: dict[str, float | None] = {}
        for i, (name, kind, code, raw) in enumerate(zip(names, flat[4::7], flat[5::7], flat[6::7])):
            if code != _SUCCESS:
                out[name] = self.failed(name, code)
            elif kind == _ULL:
                out[name] = float(raw)
            else:  # another member of the value union: read as its own C type
                out[name] = self.field(name, values[i])
        return out

    def static_absent(self, names: Sequence[str], values: Any) -> set[str]:
        """The fields of a batch that this GPU and driver will not answer until the driver changes
        (NotSupported, unknown to the driver...), of a batch ``fields`` has read."""
        return {name for name, value in zip(names, values) if _FIELD_RETURN(value) in _STATICALLY_ABSENT}


# pynvml's structures override __getattribute__ in Python (to decode bytes), ~0.3 µs per member read;
# the ctypes field descriptors read the same members in C (15 fields x 3 members per GPU per scrape).
_FIELD_RETURN = pynvml.c_nvmlFieldValue_t.nvmlReturn.__get__
_FIELD_TYPE = pynvml.c_nvmlFieldValue_t.valueType.__get__
_FIELD_VALUE = pynvml.c_nvmlFieldValue_t.value.__get__
# One c_nvmlFieldValue_t: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, value (8-byte union).
_SLOT = "IIqqIIQ"
_SUCCESS, _ULL = pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG


@functools.lru_cache(maxsize=16)
def batch_layout(count: int) -> struct.Struct | None:
    """The struct layout of ``count`` field values, or None where this pynvml's structure differs."""
    layout = struct.Struct("=" + _SLOT * count)
    return layout if count and layout.size == ctypes.sizeof(pynvml.c_nvmlFieldValue_t) * count else None


# c_nvmlValue_t union member for each nvmlValueType_t.
_VALUE_MEMBER = {pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal", pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
                 pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal", pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
                 pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal", pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
                 pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal"}
