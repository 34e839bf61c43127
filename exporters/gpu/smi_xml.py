"""Parses ``nvidia-smi -q -x`` output (no DTD and nvsmi_device_v11 to v13: drivers 418 to 595) into
what NVML answered for each GPU, in NVML's units, for the replay backend (``replay.py``).

nvidia-smi prints what NVML returned: a number with a unit, "N/A" where NVML said NotSupported, or
NVML's error string ("Requested functionality has been deprecated" is NVML_ERROR_DEPRECATED). An
element the capture's schema lacks is answered NotSupported too (``NOT_CAPTURED``). Drift between
schemas is resolved here: power_draw split into average/instant (R570), throttle reasons renamed
clock-event reasons (R535), ECC counts per location (single/double bit up to Pascal, sram/dram
after, sram uncorrectable split into parity/SEC-DED in R570), reserved memory shown apart (R510+).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Callable

import pynvml

from lockstep.exporters.catalog.enums import CLOCK_EVENT_BITS

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Refused:
    """NVML answered this ``nvmlReturn_t`` instead of a value."""

    code: int


class NotCaptured(Refused):
    """The capture's schema has no such element: answered NotSupported, told apart for the calls a
    driver without that element lacks altogether (FunctionNotFound)."""


NOT_CAPTURED = NotCaptured(pynvml.NVML_ERROR_NOT_SUPPORTED)
_REFUSALS = {"N/A": pynvml.NVML_ERROR_NOT_SUPPORTED, "[N/A]": pynvml.NVML_ERROR_NOT_SUPPORTED,
             "Not Supported": pynvml.NVML_ERROR_NOT_SUPPORTED, "[Not Supported]": pynvml.NVML_ERROR_NOT_SUPPORTED,
             "Requested functionality has been deprecated": pynvml.NVML_ERROR_DEPRECATED,
             **{text: code for code, text in pynvml.NVMLError._errcode_to_string.items()}}
_FLAGS = {"Enabled": 1, "Disabled": 0, "Yes": 1, "No": 0, "Active": 1, "Not Active": 0}


class SmiFormatError(ValueError):
    pass


def _number(suffix: str, scale: float = 1) -> Callable[[str], int]:
    """"1275 MHz" -> 1275; "67.03 W" with scale 1000 -> 67030 (mW); "16x" -> 16."""
    def parse(text: str) -> int:
        if not text.endswith(suffix):
            raise ValueError(f"no {suffix!r} unit")
        return round(float(text[:-len(suffix)].strip()) * scale)
    return parse


def _flag(text: str) -> int:
    return _FLAGS[text]


_UNITS: dict[str, Callable[[str], Any]] = {
    "str": str, "int": int, "flag": _flag, "x": _number("x"), "%": _number("%"), "C": _number("C"),
    "MHz": _number("MHz"), "mW": _number("W", 1000), "bytes": _number("MiB", MIB)}
# key: (unit, element paths under <gpu> tried in order; the first present one is what NVML answered).
SCALARS: dict[str, tuple[str, tuple[str, ...]]] = {
    "name": ("str", ("product_name",)), "uuid": ("str", ("uuid",)), "minor": ("int", ("minor_number",)),
    "pci_bus_id": ("str", ("pci/pci_bus_id",)), "persistence": ("flag", ("persistence_mode",)),
    "util_gpu": ("%", ("utilization/gpu_util",)), "util_memory": ("%", ("utilization/memory_util",)),
    "clock_sm": ("MHz", ("clocks/sm_clock",)), "clock_mem": ("MHz", ("clocks/mem_clock",)),
    "max_clock_sm": ("MHz", ("max_clocks/sm_clock",)), "max_clock_mem": ("MHz", ("max_clocks/mem_clock",)),
    # nvmlDeviceGetPowerUsage: "power_draw" until the R570 schema named it average_power_draw.
    "power_usage": ("mW", ("gpu_power_readings/average_power_draw", "gpu_power_readings/power_draw",
                           "power_readings/power_draw")),
    "power_instant": ("mW", ("gpu_power_readings/instant_power_draw",)),   # NVML_FI_DEV_POWER_INSTANT
    # The enforced limit: "enforced_power_limit" up to v11, "current_power_limit" from v12.
    "power_limit": ("mW", ("gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit")),
    "temp_gpu": ("C", ("temperature/gpu_temp",)), "temp_memory": ("C", ("temperature/memory_temp",)),
    "mem_total": ("bytes", ("fb_memory_usage/total",)), "mem_used": ("bytes", ("fb_memory_usage/used",)),
    "mem_free": ("bytes", ("fb_memory_usage/free",)), "mem_reserved": ("bytes", ("fb_memory_usage/reserved",)),
    "ecc_current": ("flag", ("ecc_mode/current_ecc",)), "ecc_pending": ("flag", ("ecc_mode/pending_ecc",)),
    "pcie_gen": ("int", ("pci/pci_gpu_link_info/pcie_gen/current_link_gen",)),
    "pcie_gen_max": ("int", ("pci/pci_gpu_link_info/pcie_gen/max_link_gen",)),
    "pcie_width": ("x", ("pci/pci_gpu_link_info/link_widths/current_link_width",)),
    "pcie_width_max": ("x", ("pci/pci_gpu_link_info/link_widths/max_link_width",)),
    "pcie_replay": ("int", ("pci/replay_counter",)),
    "mig_current": ("flag", ("mig_mode/current_mig",)), "mig_pending": ("flag", ("mig_mode/pending_mig",)),
    "retired_sbe": ("int", ("retired_pages/multiple_single_bit_retirement/retired_count",)),
    "retired_dbe": ("int", ("retired_pages/double_bit_retirement/retired_count",)),
    "retired_pending": ("flag", ("retired_pages/pending_retirement",)),
    "remap_corr": ("int", ("remapped_rows/remapped_row_corr",)),
    "remap_unc": ("int", ("remapped_rows/remapped_row_unc",)),
    "remap_pending": ("flag", ("remapped_rows/remapped_row_pending",)),
    "remap_failure": ("flag", ("remapped_rows/remapped_row_failure",)),
}
# nvmlClocksEventReason* bits by the suffix nvidia-smi gives each reason (it says display_clocks_setting).
REASON_BITS = {**CLOCK_EVENT_BITS, "display_clocks_setting": CLOCK_EVENT_BITS["display_clock_setting"]}
# Volatile ECC totals: the sum over memory locations of each layout (nvmlDeviceGetTotalEccErrors).
_ECC_LAYOUTS = {"corrected": (("single_bit/total",), ("sram_correctable", "dram_correctable")),
                "uncorrected": (("double_bit/total",), ("sram_uncorrectable", "dram_uncorrectable"),
                                ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable"))}


@dataclass(frozen=True, slots=True)
class SmiMig:
    """One ``<mig_device>``: a compute instance inside a GPU instance, with the GPU instance's memory."""

    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SmiGpu:
    values: dict[str, Any]                # SCALARS keys and the composite ones; Refused where NVML refused
    migs: tuple[SmiMig, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class SmiLog:
    driver_version: str
    attached_gpus: int
    gpus: tuple[SmiGpu, ...]


def parse_smi_log(text: str, source: str) -> SmiLog:
    """The whole capture; a malformed file or value raises SmiFormatError naming file, GPU and element."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SmiFormatError(f"{source}: not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise SmiFormatError(f"{source}: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = tuple(_gpu(gpu, f"{source}: gpu {gpu.get('id')}") for gpu in root.findall("gpu"))
    return SmiLog(root.findtext("driver_version", ""), int(root.findtext("attached_gpus", "0")), gpus)


def value(elem: ET.Element | None, unit: str, where: str) -> Any:
    """An element's value in NVML's units, a Refused, or NOT_CAPTURED for a missing element."""
    if elem is None:
        return NOT_CAPTURED
    text = (elem.text or "").strip()
    if text in _REFUSALS:
        return Refused(_REFUSALS[text])
    try:
        return _UNITS[unit](text)
    except (ValueError, KeyError):
        raise SmiFormatError(f"{where}: <{elem.tag}> {text!r} is not a {unit} value") from None


def _first(gpu: ET.Element, paths: tuple[str, ...]) -> ET.Element | None:
    return next((found for path in paths if (found := gpu.find(path)) is not None), None)


def _gpu(gpu: ET.Element, where: str) -> SmiGpu:
    values = {key: value(_first(gpu, paths), unit, where) for key, (unit, paths) in SCALARS.items()}
    remapped = gpu.find("remapped_rows")
    if remapped is not None and not len(remapped):   # "<remapped_rows>N/A</remapped_rows>": the whole call
        for key in ("remap_corr", "remap_unc", "remap_pending", "remap_failure"):
            values[key] = value(remapped, "int", where)
    values.update(_clock_reasons(gpu, where))
    volatile = gpu.find("ecc_errors/volatile")
    for kind, layouts in _ECC_LAYOUTS.items():
        values[f"ecc_{kind}"] = _ecc_total(volatile, layouts, where)
    migs = tuple(SmiMig(_mig(mig, where)) for mig in gpu.findall("mig_devices/mig_device"))
    return SmiGpu(values, migs)


def _clock_reasons(gpu: ET.Element, where: str) -> dict[str, Any]:
    """The reasons bitmask, and which call answers it: nvmlDeviceGetCurrentClocksEventReasons exists
    from R535, when nvidia-smi renamed <clocks_throttle_reasons> to <clocks_event_reasons>."""
    for api, tag in (("event", "clocks_event_reasons"), ("throttle", "clocks_throttle_reasons")):
        block = gpu.find(tag)
        if block is None:
            continue
        mask = 0
        for reason in block:
            active = value(reason, "flag", where)
            if isinstance(active, Refused):
                return {"clock_reasons": active, "clock_reasons_api": api}
            mask |= REASON_BITS[reason.tag.split("_reason_", 1)[1]] if active else 0
        return {"clock_reasons": mask, "clock_reasons_api": api}
    return {"clock_reasons": NOT_CAPTURED, "clock_reasons_api": "event"}


def _ecc_total(volatile: ET.Element | None, layouts: tuple[tuple[str, ...], ...], where: str) -> Any:
    if volatile is None:
        return NOT_CAPTURED
    for paths in layouts:
        parts = [value(volatile.find(path), "int", where) for path in paths]
        if any(part is NOT_CAPTURED for part in parts):
            continue
        refused = next((part for part in parts if isinstance(part, Refused)), None)
        return refused if refused is not None else sum(parts)
    return NOT_CAPTURED


def _mig(mig: ET.Element, where: str) -> dict[str, Any]:
    where = f"{where}: mig_device {mig.findtext('index')}"
    out = {key: value(mig.find(path), unit, where) for key, (unit, path) in {
        "index": ("int", "index"), "gpu_instance_id": ("int", "gpu_instance_id"),
        "compute_instance_id": ("int", "compute_instance_id"),
        "sm_count": ("int", "device_attributes/shared/multiprocessor_count"),
        "mem_total": ("bytes", "fb_memory_usage/total"), "mem_used": ("bytes", "fb_memory_usage/used"),
        "mem_free": ("bytes", "fb_memory_usage/free"), "mem_reserved": ("bytes", "fb_memory_usage/reserved")}.items()}
    if isinstance(out["index"], Refused):
        raise SmiFormatError(f"{where}: <index> missing")
    return out
