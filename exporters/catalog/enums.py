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


# --- lockstep_gpu_health{check}, lockstep_gpu_xid_errors_total{severity,category,action} -------------
# Verdict levels of lockstep_gpu_health.
HEALTH_OK, HEALTH_WARNING, HEALTH_FAILED = 0, 1, 2
# The agent's own checks (exporters/gpu/health.py), then DCGM's health-watch systems as dcgm_<system>.
GPU_HEALTH_CHECKS = ("bus", "xid", "ecc_uncorrectable", "row_remap", "retired_pages", "pcie", "nvlink", "thermal",
                     "driver")
DCGM_HEALTH_SYSTEMS = ("pcie", "nvlink", "pmu", "mcu", "mem", "sm", "inforom", "thermal", "power", "driver")
# The XID catalog's vocabulary (exporters/catalog/xid.py says how NVIDIA's columns map onto it).
XID_CATEGORIES = ("application", "driver", "engine", "hardware", "informational", "unused", "unknown")
XID_ACTIONS = ("none", "restart_app", "reset_gpu", "reboot_node", "service_hardware", "update_software",
               "investigate")
XID_INFO, XID_WARNING, XID_CRITICAL = "info", "warning", "critical"
XID_SEVERITIES = (XID_INFO, XID_WARNING, XID_CRITICAL)
# The GPU must take no new work until someone resets it, reboots the node or services the hardware:
# the critical XIDs, which page (GPUXidCritical) and drain the node (quarantine receiver).
XID_DRAIN_ACTIONS = ("reset_gpu", "reboot_node", "service_hardware")
# XIDs worth a ticket though nothing must stop: the hardware or the driver reported trouble it handled.
XID_TICKET_CATEGORIES = ("hardware", "driver")


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
CHECKPOINT, NETWORK, STORAGE, STRAGGLER, HANG, THROTTLE, MEMBER_LOST = (
    "checkpoint", "network", "storage", "straggler", "hang", "throttle", "member_lost")
RANK_STOPPED, RANK_DEAD = "rank_stopped", "rank_dead"
# Why a stalled job stands still (the analytics service decides one per sample). member_lost: some of
# the job's GPUs left the mapping (pod deleted, node agent gone) while the rest wait in the collective.
# A hang NCCL's RAS localises to its ranks: rank_stopped, a rank stopped entering collectives while its
# communicator's other ranks went on and wait for it; rank_dead, a rank's process RAS no longer reaches
# (unresponsive, or considered dead) while the rest wait for it. hang: a hang not localised.
STALL_CAUSES = (CHECKPOINT, NETWORK, STORAGE, STRAGGLER, HANG, MEMBER_LOST, RANK_STOPPED, RANK_DEAD)
# Where allocated GPU time goes lost: the stall causes, and throttle (time lost running slow, unstalled).
LOSS_CAUSES = (CHECKPOINT, STRAGGLER, NETWORK, STORAGE, HANG, THROTTLE, MEMBER_LOST, RANK_STOPPED, RANK_DEAD)
# Hangs localised to the ranks the job waits for: each culprit named (lockstep_job_hang_culprit).
RANK_HANGS = (RANK_STOPPED, RANK_DEAD)
# Stalls with an alert of their own: a blocking checkpoint is expected and bounded
# (CheckpointStallExcessive), a hang pages as TrainingJobHung, a lost member as TrainingJobMemberLost,
# a hang localised to its ranks as TrainingJobRankHung; TrainingJobStalled covers the rest.
STALLS_ALERTED_APART = (CHECKPOINT, HANG, MEMBER_LOST, *RANK_HANGS)

# --- the cause of each finding: lockstep_finding_cause{kind,cause}, lockstep_job_slowdown{cause} --------
HARDWARE, TRANSIENT, WORK, UNKNOWN, POWER = "hardware", "transient", "work", "unknown", "power"
HOST = "host"
# Why a rank (or a node) runs slower than its job. hardware: its own hardware explains it (a clock-event
# reason other than the job-wide power cap, its clock below its peers', its heat, a PCIe link trained
# narrower, XIDs): a node to drain. transient: a straggler with no such evidence (its pace alone changed:
# the OS, a data loader, a garbage collection, a noisy neighbour). work: imbalance with no such evidence (a
# heavier pipeline stage, skewed data). unknown: the evidence is mixed. host: the job's own pace (its step
# times, its collectives' arrival) shows the rank slow while its GPU counters look like its peers': the GPU
# waits for its host (the CPU, the data loader, the NIC), which no GPU counter sees.
STRAGGLER_CAUSES = (HARDWARE, TRANSIENT, UNKNOWN, HOST)
IMBALANCE_CAUSES = (WORK, UNKNOWN)
RANK_CAUSES = (HARDWARE, TRANSIENT, WORK, UNKNOWN, HOST)
# What each of a straggler's three views of pace said (evidence "pace_signals"): its step times, its collectives'
# arrival (NCCL Inspector, the inversion handled) and its GPU counters; absent where the job or node serves none.
PACE_VIEWS = ("step_time", "collective", "gpu")
AGREE, DISAGREE, ABSENT = "agree", "disagree", "absent"
# Why a whole job runs slower than its own recent baseline (no stall): its input (storage), the fabric, a
# checkpoint, a cluster-wide power or thermal cap, or no evidence the stack collects (unknown).
SLOWDOWN_CAUSES = (STORAGE, NETWORK, CHECKPOINT, POWER, UNKNOWN)

# --- lockstep_job_ledger_gpu_seconds_total{kind,cause}: the goodput ledger ---------------------------
# Every allocated GPU-second of a job, productive or lost to exactly one (kind, cause): a stall by its
# cause (checkpoint stalls apart, with the time a checkpoint slows the job: kind checkpoint), a straggler
# by its cause, imbalance, a job-wide slowdown by its cause, an allocation with nothing running (idle:
# the job restarting, or not started).
LEDGER: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "productive": ("",),
    "stall": tuple(c for c in STALL_CAUSES if c != CHECKPOINT),
    CHECKPOINT: (CHECKPOINT,),
    STRAGGLER: STRAGGLER_CAUSES,
    "imbalance": IMBALANCE_CAUSES,
    "slowdown": tuple(c for c in SLOWDOWN_CAUSES if c != CHECKPOINT),
    "idle": ("",),
})
LEDGER_KINDS = tuple(LEDGER)


def ledger_zero() -> dict[str, dict[str, float]]:
    """An empty ledger: every (kind, cause) at 0."""
    return {kind: dict.fromkeys(causes, 0.0) for kind, causes in LEDGER.items()}


# --- lockstep_validation_*{kind,status} (validation results, exporters/catalog/validation.py) -------
KINDS = ("nccl", "perftest", "dcgm-diag", "fio", "gpu-burn")
# A run's status: what the tool judged (pass/warn/fail), or that it never produced a judgement
# (timeout: killed at its time limit; error: exited without output we could parse).
RUN_STATUSES = ("pass", "warn", "fail", "timeout", "error")
# One check within a run (a DCGM test on one GPU, a GPU of gpu-burn, a fio job, nccl's data check).
# DCGM's "Not Run" is a skip: the test did not judge that entity.
CHECK_STATUSES = ("pass", "warn", "fail", "skip")
# Where a baseline comes from: the node's own history (the median of its last good runs, served by the
# node agent as source="history"); its peers and the hardware's floor are computed in Prometheus
# (lockstep:validation_figure:baseline_ratio{baseline=...}).
HISTORY, PEERS, FLOOR = "history", "peers", "floor"
BASELINES = (HISTORY, PEERS, FLOOR)
# Checks whose failure pages (ValidationFailed): the hardware failing DCGM's diagnostics. Any tool killed at
# its time limit pages too (a diagnostic that hangs is a GPU the driver cannot reach).
VALIDATION_PAGING_KIND = "dcgm-diag"

# --- the severity label of every alert ------------------------------------------------------------
# page wakes a human (Alertmanager's pager route); ticket goes to a queue.
PAGE, TICKET = "page", "ticket"
SEVERITIES = (PAGE, TICKET)


def numbered(states: Mapping[int, str]) -> str:
    """``1 down, 2 init, ...``: a state gauge's values as its HELP text lists them."""
    return ", ".join(f"{value} {name}" for value, name in states.items())

# lockstep_link_health's state label (the fabric exporter's verdict per port), best first.
LINK_HEALTH_STATES = ("ok", "degraded", "failed")
