"""The per-GPU verdict: ``lockstep_gpu_health{gpu,check}`` (0 ok, 1 warning, 2 failed) and
``lockstep_gpu_healthy{gpu}`` (0 when any check failed), from what one scrape read.

Thresholds are DCGM's health-watch limits (NVIDIA/DCGM ``dcgm_gpu_hardware_limits.h``): more than 8
PCIe replays a minute, 15 retired pages (warning) and 63 (failed), NVLink CRC errors at 100 a second.
Rates need the previous scrape's counters: ``HealthTracker`` keeps those per GPU, as DCGM's own
watches do, and what the link and clock evidence needs: when an unexplained clock-event reason began,
and the PCIe link's last judgement under load. A check whose inputs the GPU does not report is absent,
not ok.

Link and bus evidence (a GPU that passes every fixed check yet runs slower than its peers):
``pcie_link`` the PCIe link below its maximum generation or width while the GPU is busy (at idle GPUs
drop the generation to save power: the real idle captures show gen 1 of 4, so only a loaded GPU is
judged, and the last judgement is held while idle); ``clocks`` a clock-event reason that costs speed
without a thermal or power cause (hardware slowdown with no thermal or power-brake bit, clocks held
by an applications-clocks setting) for ``CLOCKS_PERSIST_S`` on end; ``nvlink_links`` fewer links
active than the GPU's topology has (links NVML knows on it; per-link mode only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping

from lockstep.exporters.catalog import gpu as m
from lockstep.exporters.catalog.enums import HEALTH_FAILED, HEALTH_OK, HEALTH_WARNING, THERMAL_REASONS, reason_bits
from lockstep.exporters.gpu.snapshot import GpuSnapshot
from lockstep.exporters.toolkit.sample import Sample

OK, WARNING, FAILED = HEALTH_OK, HEALTH_WARNING, HEALTH_FAILED
PCIE_REPLAYS_PER_MINUTE = 8
RETIRED_PAGES_WARNING, RETIRED_PAGES_FAILED = 15, 63
NVLINK_CRC_PER_SECOND = 100.0
_THERMAL = reason_bits(THERMAL_REASONS)
LOADED_PERCENT = 50        # utilization at which the PCIe link must be at its maximum
CLOCKS_PERSIST_S = 300.0   # an unexplained clock-event reason held this long is evidence, not a blip
_UNEXPLAINED = reason_bits(("hw_slowdown", "applications_clocks_setting"))
_CAUSED = reason_bits(THERMAL_REASONS + ("sw_power_cap", "hw_power_brake_slowdown"))


@dataclass(slots=True)
class _Previous:
    at: float
    pcie_replay: float | None
    nvlink: dict[str, tuple[float | None, ...]]
    links_seen: frozenset[str]    # every link ever read active (per-link mode), to notice one going down
    unexplained_since: float | None = None   # when the current run of an unexplained clock reason began
    pcie_link: int | None = None             # the PCIe link's last verdict under load


@dataclass
class HealthTracker:
    """Counters of the previous scrape per GPU, for the rate checks."""

    previous: dict[int, _Previous] = field(default_factory=dict)

    def verdict(self, snap: GpuSnapshot, now: float, xid_level: int | None) -> dict[str, int]:
        """Every check this GPU's snapshot can answer. ``xid_level``: the worst XID severity seen in
        the XID window (None where XID events are not watched)."""
        before = self.previous.get(snap.static.index)
        links = {link.link: _link(link) for link in snap.nvlink}
        seen = (before.links_seen if before else frozenset()) | links.keys()
        since = unexplained_since(snap, before.unexplained_since if before else None, now)
        link = pcie_link_check(snap, before.pcie_link if before else None)
        self.previous[snap.static.index] = _Previous(now, snap.pcie_replay, links, seen, since, link)
        elapsed = now - before.at if before is not None else 0.0
        checks = {"bus": OK, **memory_checks(snap), **config_checks(snap)}
        if link is not None:
            checks["pcie_link"] = link
        if snap.clock_event_reasons is not None:
            checks["clocks"] = WARNING if since is not None and now - since >= CLOCKS_PERSIST_S else OK
        if snap.nvlink_links:
            active = sum(1 for name in links if name != "total")
            checks["nvlink_links"] = WARNING if active < snap.nvlink_links else OK
        if xid_level is not None:
            checks["xid"] = xid_level
        pcie = pcie_check(snap, before.pcie_replay if before else None, elapsed)
        if pcie is not None:
            checks["pcie"] = pcie
        nvlink = nvlink_check(links, before.nvlink if before else {}, seen, elapsed)
        if nvlink is not None:
            checks["nvlink"] = nvlink
        return checks

    def lost(self, index: int, xid_level: int | None) -> dict[str, int]:
        """A GPU NVML calls lost: it fell off the bus (XID 79) or is wedged."""
        self.previous.pop(index, None)
        return {"bus": FAILED, **({"xid": xid_level} if xid_level is not None else {})}


def _link(counters) -> tuple[float | None, ...]:
    return counters.replay, counters.recovery, counters.crc_flit, counters.crc_data


def memory_checks(snap: GpuSnapshot) -> dict[str, int]:
    out = {}
    if snap.ecc_uncorrected is not None:  # volatile: cleared by the GPU reset NVIDIA asks for
        out["ecc_uncorrectable"] = FAILED if snap.ecc_uncorrected > 0 else OK
    if snap.remapped_failed is not None or snap.remapped_pending is not None:
        out["row_remap"] = (FAILED if snap.remapped_failed else WARNING if snap.remapped_pending else OK)
    if snap.retired_sbe is not None or snap.retired_dbe is not None or snap.retired_pending is not None:
        total = (snap.retired_sbe or 0) + (snap.retired_dbe or 0)
        out["retired_pages"] = (FAILED if total >= RETIRED_PAGES_FAILED else
                                WARNING if total >= RETIRED_PAGES_WARNING or snap.retired_pending else OK)
    return out


def config_checks(snap: GpuSnapshot) -> dict[str, int]:
    out = {}
    if snap.clock_event_reasons is not None:
        out["thermal"] = WARNING if snap.clock_event_reasons & _THERMAL else OK
    if snap.persistence_mode is not None:   # off: driver state torn down and rebuilt around every job
        out["driver"] = OK if snap.persistence_mode else WARNING
    return out


def unexplained_since(snap: GpuSnapshot, since: float | None, now: float) -> float | None:
    """When the clocks began to be held back with no thermal or power cause (None: they are not now)."""
    reasons = snap.clock_event_reasons
    if reasons is None or not reasons & _UNEXPLAINED or reasons & _CAUSED:
        return None
    return now if since is None else since


def pcie_link_check(snap: GpuSnapshot, last: int | None) -> int | None:
    """Warning when the link runs below its maximum generation or width under load; idle keeps ``last``."""
    s = snap.static
    if snap.utilization_gpu is None or snap.utilization_gpu < LOADED_PERCENT:
        return last
    below = [(now, top) for now, top in ((snap.pcie_gen, s.pcie_gen_max), (snap.pcie_width, s.pcie_width_max))
             if now is not None and top is not None]
    if not below:
        return last
    return WARNING if any(now < top for now, top in below) else OK


def pcie_check(snap: GpuSnapshot, replay_before: float | None, elapsed: float) -> int | None:
    degraded = (snap.pcie_width is not None and snap.static.pcie_width_max is not None
                and snap.pcie_width < snap.static.pcie_width_max)
    rate_high = (snap.pcie_replay is not None and replay_before is not None and elapsed > 0
                 and (snap.pcie_replay - replay_before) * 60.0 / elapsed > PCIE_REPLAYS_PER_MINUTE)
    if snap.pcie_width is None and snap.pcie_replay is None:
        return None
    return WARNING if degraded or rate_high else OK


def nvlink_check(now: dict[str, tuple[float | None, ...]], before: dict[str, tuple[float | None, ...]],
                 seen: frozenset[str], elapsed: float) -> int | None:
    """Failed when a link once read active is no longer (per-link mode only: by default only the
    all-links totals are read); warning when replay or recovery counts grew, or CRC errors ran at
    DCGM's 100 a second."""
    if not seen:
        return None
    if any(link not in now for link in seen):
        return FAILED
    for link, counts in now.items():
        old = before.get(link)
        if old is None or elapsed <= 0:
            continue
        grew = [(new - was) if new is not None and was is not None else 0.0 for new, was in zip(counts, old)]
        if grew[0] > 0 or grew[1] > 0 or (grew[2] + grew[3]) / elapsed >= NVLINK_CRC_PER_SECOND:
            return WARNING
    return OK


def health_samples(gpu: str, checks: Mapping[str, int]) -> tuple[Sample, ...]:
    return _samples(gpu, tuple(checks.items()))


# A verdict changes rarely: its ~10 series per GPU are built once per (gpu, verdict) and reused (the
# bound only caps memory for a flapping GPU), as samples.py does for the clock-event reasons.
@lru_cache(maxsize=1024)
def _samples(gpu: str, checks: tuple[tuple[str, int], ...]) -> tuple[Sample, ...]:
    out = [Sample(m.HEALTH, (gpu, check), float(level)) for check, level in checks]
    out.append(Sample(m.HEALTHY, (gpu,), 0.0 if any(level == FAILED for _, level in checks) else 1.0))
    return tuple(out)
