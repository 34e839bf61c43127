"""The values of the catalog's enum labels and state gauges, and the named subsets consumers select.

Collectors, dashboards, alerts, analytics and the simulator import these instead of retyping them,
and the HELP text of each metric concerned is written from them. Where consumers select differently
on purpose (a thermal alert, a throttle count), the selection has a name here too.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

# --- lockstep_gpu_clock_event_active{reason} ------------------------------------------------------
# nvmlClocksEventReason* bits (pynvml's nvmlClocksEventReasonGpuIdle ... DisplayClockSetting), in bit order.
CLOCK_EVENT_BITS: Mapping[str, int] = MappingProxyType({
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100,
})
CLOCK_EVENT_REASONS = tuple(CLOCK_EVENT_BITS)
# Nothing runs: the clocks drop by design (the node dashboard shows every reason but this one).
IDLE_REASON = "gpu_idle"
# The GPU holds its board power limit: on a busy H100 job most GPUs hold it most of the time.
POWER_CAP_REASON = "sw_power_cap"
# Reasons that cost clock speed on their own, held back by power or heat (throttled GPUs on the
# dashboards, the straggler evidence, the monthly report). Idle, application clocks, sync boost and
# the display clock do not.
THROTTLE_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown")
# Heat alone (GPUThermalThrottling): the driver's and the hardware's thermal slowdown.
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")


def reason_bits(reasons: Iterable[str]) -> int:
    """The NVML bitmask of ``reasons`` (a KeyError names an unknown one)."""
    bits = 0
    for reason in reasons:
        bits |= CLOCK_EVENT_BITS[reason]
    return bits


# --- lockstep_ib_port_state, lockstep_ib_port_phys_state (sysfs "4: ACTIVE", "5: LinkUp") ------------
IB_PORT_STATES: Mapping[int, str] = MappingProxyType(
    {1: "down", 2: "init", 3: "armed", 4: "active", 5: "active_defer"})
# The port passes data. The link-down alert fires below it (down, init, armed); the fabric dashboard's
# "not active" count and the analytics' rail-down signal count any other state, active_defer included.
IB_PORT_ACTIVE = 4
IB_PHYS_STATES: Mapping[int, str] = MappingProxyType(
    {1: "sleep", 2: "polling", 3: "disabled", 4: "port_configuration_training", 5: "link_up",
     6: "link_error_recovery", 7: "phy_test"})

# --- lockstep_job_stalled{cause}, lockstep_job_lost_gpu_seconds_total{cause} -----------------------
CHECKPOINT, NETWORK, STORAGE, STRAGGLER, HANG, THROTTLE = (
    "checkpoint", "network", "storage", "straggler", "hang", "throttle")
# Why a stalled job stands still (the analytics service decides one per sample).
STALL_CAUSES = (CHECKPOINT, NETWORK, STORAGE, STRAGGLER, HANG)
# Where allocated GPU time goes lost: the stall causes, and throttle (time lost running slow, unstalled).
LOSS_CAUSES = (CHECKPOINT, STRAGGLER, NETWORK, STORAGE, HANG, THROTTLE)
# Stalls with an alert of their own: a blocking checkpoint is expected and bounded
# (CheckpointStallExcessive), a hang pages as TrainingJobHung; TrainingJobStalled covers the rest.
STALLS_ALERTED_APART = (CHECKPOINT, HANG)

# --- the severity label of every alert ------------------------------------------------------------
# page wakes a human (Alertmanager's pager route); ticket goes to a queue.
PAGE, TICKET = "page", "ticket"
SEVERITIES = (PAGE, TICKET)


def numbered(states: Mapping[int, str]) -> str:
    """``1 down, 2 init, ...``: a state gauge's values as its HELP text lists them."""
    return ", ".join(f"{value} {name}" for value, name in states.items())
