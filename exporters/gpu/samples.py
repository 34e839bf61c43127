"""``GpuSnapshot`` → catalog samples. Pure; the one place NVML units become base units."""
from __future__ import annotations

from functools import lru_cache

from lockstep.exporters.catalog import gpu as m
from lockstep.exporters.gpu.snapshot import CLOCK_EVENT_REASONS, GpuSnapshot, GpuStatic, MigDevice
from lockstep.exporters.toolkit.sample import Sample, new_sample

# (multiplier, divisor) from NVML's units; dividing keeps 41 % → 0.41 exact in the exposition.
MHZ = (1e6, 1)      # NVML clocks are MHz
MILLI = (1, 1000)   # NVML power is mW, energy mJ
PERCENT = (1, 100)  # NVML utilization is percent
ONE = (1, 1)

_SCALARS = (  # (metric, snapshot attribute, factor)
    (m.UTILIZATION, "utilization_gpu", PERCENT), (m.MEMORY_UTILIZATION, "utilization_memory", PERCENT),
    (m.SM_CLOCK, "sm_clock_mhz", MHZ), (m.MEMORY_CLOCK, "mem_clock_mhz", MHZ),
    (m.POWER, "power_mw", MILLI), (m.POWER_LIMIT, "power_limit_mw", MILLI), (m.ENERGY, "energy_mj", MILLI),
    (m.TEMPERATURE, "temperature_c", ONE), (m.MEMORY_TEMPERATURE, "memory_temperature_c", ONE),
    (m.MEMORY_USED, "memory_used", ONE), (m.MEMORY_TOTAL, "memory_total", ONE),
    (m.PCIE_REPLAY, "pcie_replay", ONE), (m.PCIE_WIDTH, "pcie_width", ONE), (m.PCIE_GEN, "pcie_gen", ONE),
    (m.PERSISTENCE_MODE, "persistence_mode", ONE), (m.ECC_ENABLED, "ecc_mode", ONE),
    (m.MEMORY_RESERVED, "memory_reserved", ONE), (m.RETIRED_PAGES_PENDING, "retired_pending", ONE),
    (m.MIG_MODE, "mig_mode", ONE),
)
_STATIC = ((m.SM_CLOCK_MAX, "sm_clock_max_mhz", MHZ), (m.MEMORY_CLOCK_MAX, "mem_clock_max_mhz", MHZ),
           (m.PCIE_WIDTH_MAX, "pcie_width_max", ONE), (m.PCIE_GEN_MAX, "pcie_gen_max", ONE))
_LABELLED = (  # (metric, label value, attribute)
    (m.ECC_ERRORS, "corrected", "ecc_corrected"), (m.ECC_ERRORS, "uncorrected", "ecc_uncorrected"),
    (m.REMAPPED_ROWS, "correctable", "remapped_correctable"),
    (m.REMAPPED_ROWS, "uncorrectable", "remapped_uncorrectable"),
    (m.REMAPPED_ROWS, "pending", "remapped_pending"), (m.REMAPPED_ROWS, "failed", "remapped_failed"),
    (m.RETIRED_PAGES, "single_bit", "retired_sbe"), (m.RETIRED_PAGES, "double_bit", "retired_dbe"),
)
_NVLINK_TYPES = ("replay", "recovery", "crc_flit", "crc_data")
_PROF = (("sm_active", m.SM_ACTIVE), ("sm_occupancy", m.SM_OCCUPANCY), ("tensor_active", m.TENSOR_ACTIVE),
         ("dram_active", m.DRAM_ACTIVE))


# Series that depend only on GpuStatic, or on a clock-event bitmask that changes only when throttling
# starts or ends, are built once and reused: 22 of an H100's ~55 samples, ~9 of its ~27 µs here per
# scrape. The bounds only cap memory (statics re-read after a reopen, masks of a flapping GPU).
_CACHED_GPUS = 64
_CACHED_MASKS = 1024


@lru_cache(maxsize=_CACHED_GPUS)
def identity_samples(static: GpuStatic, driver: str, up: bool) -> tuple[Sample, ...]:
    gpu = str(static.index)
    return (Sample(m.INFO, (gpu, static.uuid, static.name, static.pci_bus_id, driver), 1.0),
            Sample(m.UP, (gpu,), 1.0 if up else 0.0))


def snapshot_samples(snap: GpuSnapshot) -> list[Sample]:
    """Every present value of one GPU's snapshot (identity and up come from ``identity_samples``).
    Builds a list rather than yielding: ~120 samples per GPU, and generator hops cost as much as encoding."""
    static = snap.static
    index = str(static.index)
    gpu = (index,)
    maxima, p2p = _static_samples(static)
    out = [new_sample((metric, gpu, value * mul / div)) for metric, attr, (mul, div) in _SCALARS
           if (value := getattr(snap, attr)) is not None]
    out += maxima
    out += [new_sample((metric, (index, label), value)) for metric, label, attr in _LABELLED
            if (value := getattr(snap, attr)) is not None]
    out += _derived(snap, index)
    for link in snap.nvlink:
        out += [new_sample((m.NVLINK_ERRORS, (index, link.link, kind), value)) for kind in _NVLINK_TYPES
                if (value := getattr(link, kind)) is not None]
    out += p2p
    prof = dict(snap.prof)
    out += [new_sample((metric, gpu, prof[key])) for key, metric in _PROF if key in prof]
    out += [Sample(m.NVLINK_BANDWIDTH, (index, direction), prof[key])
            for key, direction in (("nvlink_rx", "rx"), ("nvlink_tx", "tx")) if key in prof]
    if snap.migs:
        out += mig_samples(index, snap.migs)
    return out


def mig_samples(gpu: str, migs: tuple[MigDevice, ...]) -> list[Sample]:
    """One info series per MIG device; memory once per GPU instance (its compute instances share it)."""
    out = [Sample(m.MIG_INFO, (gpu, str(mig.gpu_instance), _str(mig.compute_instance), mig.profile, mig.uuid), 1.0)
           for mig in migs]
    seen = set()
    for mig in migs:
        if mig.gpu_instance in seen:
            continue
        seen.add(mig.gpu_instance)
        labels = (gpu, str(mig.gpu_instance), mig.profile)
        out += [Sample(metric, labels, value) for metric, value in
                ((m.MIG_MEMORY_USED, mig.memory_used), (m.MIG_MEMORY_TOTAL, mig.memory_total)) if value is not None]
    return out


def _str(value: int | None) -> str:
    return "" if value is None else str(value)


@lru_cache(maxsize=_CACHED_GPUS)
def _static_samples(static: GpuStatic) -> tuple[tuple[Sample, ...], tuple[Sample, ...]]:
    """(maxima, P2P status) series of one GPU."""
    index = str(static.index)
    maxima = tuple(Sample(metric, (index,), value * mul / div) for metric, attr, (mul, div) in _STATIC
                   if (value := getattr(static, attr)) is not None)
    return maxima, tuple(Sample(m.P2P_STATUS, (index, str(peer)), status) for peer, status in static.p2p)


@lru_cache(maxsize=_CACHED_MASKS)
def _clock_events(gpu: str, reasons: int) -> tuple[Sample, ...]:
    return tuple(Sample(m.CLOCK_EVENT, (gpu, reason), 1.0 if reasons & bit else 0.0)
                 for bit, reason in CLOCK_EVENT_REASONS)


def _derived(snap: GpuSnapshot, gpu: str) -> list[Sample]:
    out = []
    if snap.clock_event_reasons is not None:
        out += _clock_events(gpu, snap.clock_event_reasons)
    if snap.pcie_width is not None and snap.static.pcie_width_max is not None:
        out.append(Sample(m.PCIE_LINK_DEGRADED, (gpu,), 1.0 if snap.pcie_width < snap.static.pcie_width_max else 0.0))
    return out
