"""One GPU's state as read in one scrape, in NVML's own units (MHz, mW, mJ, percent, bytes).

``None`` everywhere means absent (NotSupported, older driver): never emitted, never zero. Units are
converted once, in ``samples.py``."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.catalog.enums import CLOCK_EVENT_BITS


@dataclass(frozen=True, slots=True)
class GpuStatic:
    """Facts read once per GPU: identity, maxima, P2P topology (fixed until reboot / BIOS change)."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    minor: int | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    pcie_width_max: float | None = None
    pcie_gen_max: float | None = None
    p2p: tuple[tuple[int, int], ...] = ()   # (peer index, nvmlGpuP2PStatus_t)
    memory_v2: bool = False     # nvmlDeviceGetMemoryInfo_v2 answers (R510+): used without the reservation
    mig_capable: bool = False   # nvmlDeviceGetMigMode answers (A100, H100...): MIG mode read per scrape
    fields: tuple[str, ...] | None = None   # the field batch's names this GPU answers at all; None: all of them


@dataclass(frozen=True, slots=True)
class NvLinkCounters:
    link: str     # link number, or "total" for NVML's all-links sums
    replay: float | None
    recovery: float | None
    crc_flit: float | None
    crc_data: float | None


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (a compute instance in a GPU instance). Memory belongs to the GPU instance."""

    index: int
    gpu_instance: int
    compute_instance: int | None
    uuid: str                      # MIG-...; "" where NVML did not say
    profile: str                   # "1g.10gb", "1c.2g.20gb"; "" where NVML did not say
    memory_used: float | None = None
    memory_total: float | None = None


# Not frozen: a frozen dataclass's __init__ sets each of these 36 fields through object.__setattr__ (13 µs
# against 5 µs per GPU and scrape); nothing hashes a snapshot or keeps one past its scrape.
@dataclass(slots=True)
class GpuSnapshot:
    static: GpuStatic
    utilization_gpu: float | None = None        # percent
    utilization_memory: float | None = None     # percent
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_instant_mw: float | None = None       # NVML_FI_DEV_POWER_INSTANT (R530+)
    power_average_mw: float | None = None       # nvmlDeviceGetPowerUsage: a 1 s average on Ampere and newer

    @property
    def power_mw(self) -> float | None:
        """What lockstep_gpu_power_watts reports: the instant reading where the driver has one."""
        return self.power_instant_mw if self.power_instant_mw is not None else self.power_average_mw
    power_limit_mw: float | None = None
    energy_mj: float | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    memory_used: float | None = None            # bytes
    memory_free: float | None = None
    memory_total: float | None = None
    memory_reserved: float | None = None        # set aside by the driver/firmware (v2 memory info)
    clock_event_reasons: int | None = None      # nvmlClocksEventReason* bitmask
    ecc_mode: float | None = None
    ecc_corrected: float | None = None
    ecc_uncorrected: float | None = None
    remapped_correctable: float | None = None
    remapped_uncorrectable: float | None = None
    remapped_pending: float | None = None
    remapped_failed: float | None = None
    retired_sbe: float | None = None            # pages retired for multiple single-bit errors
    retired_dbe: float | None = None            # pages retired for a double-bit error
    retired_pending: float | None = None        # 1 if a retirement awaits a reboot / driver reload
    pcie_replay: float | None = None
    pcie_width: float | None = None
    pcie_gen: float | None = None
    persistence_mode: float | None = None
    mig_mode: float | None = None               # current MIG mode, 1 enabled; None where the GPU has none
    migs: tuple[MigDevice, ...] = ()
    nvlink: tuple[NvLinkCounters, ...] = ()
    nvlink_links: int | None = None             # links NVML knows on this GPU, active or not (per-link mode)
    prof: tuple[tuple[str, float], ...] = ()    # DCGM profiling fields (ProfSource keys)
    fields_answered: tuple[str, ...] | None = None  # read with every field asked: those the GPU answers at all


# nvmlClocksEventReason* bits (pynvml), in the order of the catalog's HELP for clock_event_active.
CLOCK_EVENT_REASONS = tuple((bit, reason) for reason, bit in CLOCK_EVENT_BITS.items())
