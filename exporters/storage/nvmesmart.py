"""An NVMe controller's SMART / Health Information log (NVMe Base Specification, log page 02h) as ``nvme smart-log
-o json`` (linux-nvme/nvme-cli ``json_smart_log``) or ``smartctl -j`` (``nvme_smart_health_information_log``)
prints it. Units are converted here: nvme-cli's temperature is in kelvin, smartctl's in Celsius; percentages
become ratios; a data unit is 1000 blocks of 512 bytes (the specification's definition)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from lockstep.exporters.toolkit.jsonload import load_json

DATA_UNIT_BYTES = 512_000
# Critical Warning bits, NVMe Base Specification figure "SMART / Health Information Log Page".
WARNING_BITS = ("available_spare", "temperature", "reliability_degraded", "read_only", "volatile_backup_failed",
                "pmr_read_only")


class NvmeFormatError(ValueError):
    """Not a SMART / health log in either tool's JSON."""


@dataclass(frozen=True, slots=True)
class NvmeHealth:
    critical_warning: int
    temperature_celsius: float | None
    available_spare_ratio: float
    available_spare_threshold_ratio: float
    percentage_used_ratio: float        # may pass 1.0: the specification lets it run to 255 %
    media_errors: int
    data_units_read: int | None
    data_units_written: int | None

    def warning(self, bit: int) -> bool:
        return bool(self.critical_warning >> bit & 1)


def _uint(doc: Mapping[str, Any], key: str, required: bool = True) -> int | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NvmeFormatError(f"{key}: not an unsigned integer: {str(value)[:24]!r}")
    return value


def parse_smart_log(text: str) -> NvmeHealth:
    try:
        doc = load_json(text)
    except ValueError as exc:
        raise NvmeFormatError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise NvmeFormatError("not a JSON object")
    if isinstance(doc.get("nvme_smart_health_information_log"), dict):   # smartctl -j
        log = doc["nvme_smart_health_information_log"]
        temperature = _uint(log, "temperature", required=False)
        return NvmeHealth(_uint(log, "critical_warning"), None if temperature is None else float(temperature),
                          _uint(log, "available_spare") / 100, _uint(log, "available_spare_threshold") / 100,
                          _uint(log, "percentage_used") / 100, _uint(log, "media_errors"),
                          _uint(log, "data_units_read", False), _uint(log, "data_units_written", False))
    if "avail_spare" not in doc:
        raise NvmeFormatError("neither nvme smart-log nor smartctl JSON (no avail_spare, no "
                              "nvme_smart_health_information_log)")
    warning = doc.get("critical_warning")
    if isinstance(warning, dict):   # nvme smart-log -v: the byte and its bits
        warning = warning.get("value")
    kelvin = _uint(doc, "temperature", required=False)
    return NvmeHealth(_uint({"critical_warning": warning}, "critical_warning"),
                      None if not kelvin else kelvin - 273.15,   # 0: the controller reports no temperature
                      _uint(doc, "avail_spare") / 100, _uint(doc, "spare_thresh") / 100,
                      _uint(doc, "percent_used") / 100, _uint(doc, "media_errors"),
                      _uint(doc, "data_units_read", False), _uint(doc, "data_units_written", False))
