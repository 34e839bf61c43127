"""DCGM profiling fields NVML lacks (SM active/occupancy, tensor-pipe active, DRAM active, NVLink
bandwidth), through DCGM's Python bindings (``DcgmReader`` from the datacenter-gpu-manager package,
installed under /usr/local/dcgm/bindings/python3, not on PyPI).

Where the bindings are absent the dcgm backend says so once and runs as plain NVML; ``sim`` serves
the same fields from ``gpus.json``'s ``prof`` block.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from lockstep.exporters.catalog.enums import DCGM_HEALTH_SYSTEMS

log = logging.getLogger("lockstep.gpu.dcgm")

# dcgm_fields.DCGM_FI_PROF_* ids (stable across DCGM 2.x/3.x); ratios except NVLink (bytes/s).
PROF_FIELDS = {1002: "sm_active", 1003: "sm_occupancy", 1004: "tensor_active", 1005: "dram_active",
               1011: "nvlink_tx", 1012: "nvlink_rx"}
UPDATE_US = 1_000_000
# dcgm_structs: DCGM_HEALTH_WATCH_* bits, DCGM_HEALTH_RESULT_PASS/WARN/FAIL, dcgm_fields.DCGM_FE_GPU.
HEALTH_SYSTEMS = dict(zip((0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200), DCGM_HEALTH_SYSTEMS))
HEALTH_WATCH_ALL = 0xFFFFFFFF
HEALTH_LEVELS = {0: 0, 10: 1, 20: 2}
FE_GPU = 1


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
        self._watching = False

    def health(self) -> Mapping[int, Mapping[str, int]]:
        """DCGM's health watches per GPU as ``dcgm_<system>`` checks (0 pass, 1 warn, 2 fail), through the
        reader's own connection (DCGM takes one client connection per process). Watches are set once."""
        group = getattr(self._reader, "m_dcgmGroup", None)
        if group is None:   # not connected (yet): read() reconnects
            return {}
        if not self._watching:
            group.health.Set(HEALTH_WATCH_ALL)
            self._watching = True
        return parse_health(group.health.Check(), group.GetGpuIds())

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


def parse_health(response: Any, gpus: Any) -> dict[int, dict[str, int]]:
    """A ``dcgmHealthResponse`` (v4/v5: overallHealth, incidentCount, incidents[] of system, health,
    error, entityInfo) → the worst result per GPU and system; every watched system of every GPU is
    present, passing unless an incident says otherwise."""
    out = {int(gpu): {f"dcgm_{name}": 0 for name in HEALTH_SYSTEMS.values()} for gpu in gpus}
    for incident in list(response.incidents)[:response.incidentCount]:
        name = HEALTH_SYSTEMS.get(incident.system)
        if incident.entityInfo.entityGroupId != FE_GPU or name is None:
            continue   # NVSwitch, CPU and link entities are not GPUs of this collector
        checks = out.setdefault(int(incident.entityInfo.entityId), {f"dcgm_{n}": 0 for n in HEALTH_SYSTEMS.values()})
        checks[f"dcgm_{name}"] = max(checks[f"dcgm_{name}"], HEALTH_LEVELS.get(incident.health, 2))
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
