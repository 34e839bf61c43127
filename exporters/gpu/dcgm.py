"""DCGM profiling fields NVML lacks (SM active/occupancy, tensor-pipe active, DRAM active, NVLink
bandwidth), through DCGM's Python bindings (``DcgmReader`` from the datacenter-gpu-manager package,
installed under /usr/local/dcgm/bindings/python3, not on PyPI).

Where the bindings are absent the dcgm backend says so once and runs as plain NVML; ``sim`` serves
the same fields from ``gpus.json``'s ``prof`` block.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

log = logging.getLogger("lockstep.gpu.dcgm")

# dcgm_fields.DCGM_FI_PROF_* ids (stable across DCGM 2.x/3.x); ratios except NVLink (bytes/s).
PROF_FIELDS = {1002: "sm_active", 1003: "sm_occupancy", 1004: "tensor_active", 1005: "dram_active",
               1011: "nvlink_tx", 1012: "nvlink_rx"}
UPDATE_US = 1_000_000


def open_dcgm(reader_factory: Any = None) -> "DcgmProf | None":
    """A DCGM profiling source, or None (logged once) when the bindings or the host engine are missing."""
    try:
        if reader_factory is None:
            from DcgmReader import DcgmReader as reader_factory  # type: ignore[import-not-found,no-redef]
        reader = reader_factory(fieldIds=list(PROF_FIELDS), updateFrequency=UPDATE_US)
    except ImportError:
        log.warning("DCGM Python bindings (DcgmReader) not installed; --gpu.backend=dcgm falls back to NVML "
                    "without SM/tensor/DRAM activity and NVLink bandwidth")
        return None
    except Exception as exc:  # host engine not running, no permission: same fallback, say why
        log.warning("DCGM unavailable (%s: %s); --gpu.backend=dcgm falls back to NVML", type(exc).__name__, exc)
        return None
    return DcgmProf(reader)


class DcgmProf:
    """DCGM GPU ids follow NVML's enumeration order on a node without GPU affinity masks."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def read(self) -> Mapping[int, Mapping[str, float]]:
        latest = self._reader.GetLatestGpuValuesAsFieldIdDict() or {}
        return {int(gpu): parse_dcgm_values(values) for gpu, values in latest.items()}

    def close(self) -> None:
        shutdown = getattr(self._reader, "Shutdown", None)
        if shutdown is not None:
            shutdown()


def parse_dcgm_values(values: Mapping[int, Any]) -> dict[str, float]:
    """``{fieldId: value}`` of one GPU → ProfSource keys; DCGM's blank sentinels (DCGM_FP64_BLANK = 2^47 and above, or None)
    mean not sampled yet and are dropped."""
    out = {}
    for field_id, key in PROF_FIELDS.items():
        value = values.get(field_id)
        if isinstance(value, (int, float)) and abs(value) < 2 ** 47:
            out[key] = float(value)
    return out


class SimProf:
    """The ``prof`` block of each GPU in the simulator's gpus.json (lost GPUs report nothing)."""

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def read(self) -> Mapping[int, Mapping[str, float]]:
        return {gpu["index"]: {k: float(v) for k, v in (gpu.get("prof") or {}).items() if k in PROF_FIELDS.values()}
                for gpu in self._sim.document()["gpus"] if not gpu.get("lost")}

    def close(self) -> None:
        pass
