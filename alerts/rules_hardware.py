"""Alerts on the hardware the node agents watch: PFC, InfiniBand ports, GPUs.

Fabric and GPU alerts carry the ``job_id`` of the job on the faulty part where there is one (joined
through the recorded ``lockstep:node_job:info`` / ``lockstep:gpu_job:info``). That label is the
inhibition plumbing: Alertmanager mutes a job's straggler and stall alerts while a PFCPauseStorm
with the same ``job_id`` fires (see ``alertmanager.py``).
"""
from __future__ import annotations

from alerts.config import AlertsConfig
from alerts.model import Alert, metric, with_job
from alerts.recording import GPU_JOB, NODE_JOB, PFC_PAUSED_INTERFACE, PFC_STORM_EVENTS
from exporters.catalog.enums import IB_PORT_ACTIVE, IB_PORT_STATES, PAGE, THERMAL_REASONS, TICKET


def pfc(config: AlertsConfig) -> list[Alert]:
    t = config.thresholds
    paused = f"{PFC_PAUSED_INTERFACE} > {t.pfc_paused_ratio:g}"
    storms = f"{PFC_STORM_EVENTS} > 0"
    return [
        Alert("PFCPauseStorm", with_job(paused, "node", NODE_JOB, "node, interface, priority"), PAGE,
              "PFC pause storm on {{ $labels.node }} {{ $labels.interface }} priority {{ $labels.priority }}",
              "{{ $labels.interface }} on {{ $labels.node }} spent {{ $value | humanizePercentage }} of the last "
              f"{t.pfc_window} paused on priority {{{{ $labels.priority }}}} (threshold {t.pfc_paused_ratio:.0%}). "
              "Lossless traffic through it{{ with $labels.rail }} on rail {{ . }}{{ end }} is frozen; every collective "
              "through it waits.",
              (("signal", "paused_time"),), for_="30s"),
        # The NIC's own watchdog: it kept sending pauses too long (its host is the source) and, at
        # level=error, stopped sending them (it drops instead).
        Alert("PFCPauseStorm", with_job(storms, "node", NODE_JOB, "node, interface, level"), PAGE,
              "PFC storm watchdog fired on {{ $labels.node }} {{ $labels.interface }}",
              "The {{ $labels.level }} pause-storm watchdog of {{ $labels.interface }} on {{ $labels.node }} fired "
              f"{{{{ $value }}}} times in the last {t.pfc_window}.",
              (("signal", "watchdog"),), for_="30s"),
    ]


def infiniband(config: AlertsConfig) -> list[Alert]:
    t = config.thresholds
    sel = ",".join(s for s in (config.selectors.node, config.selectors.ib_port) if s)
    port = "{{ $labels.device }} port {{ $labels.port }} on {{ $labels.node }}"
    rate = metric("lockstep_ib_port_rate_bytes_per_second", sel)
    # Below ACTIVE (down, init, armed): the port passes no data; active_defer still does.
    down = f"{metric('lockstep_ib_port_state', sel)} < {IB_PORT_ACTIVE}"
    return [
        Alert("InfiniBandLinkDown", with_job(down, "node", NODE_JOB),
              PAGE, f"InfiniBand link down: {port}",
              f"{port} is in logical state {{{{ $value }}}} ({IB_PORT_ACTIVE} is "
              f"{IB_PORT_STATES[IB_PORT_ACTIVE].upper()}); the rail is missing from every "
              "collective of the job on this node.", for_="2m"),
        Alert("InfiniBandLinkFlapping",
              f"increase({metric('lockstep_ib_port_link_downed_total', sel)}[{t.ib_flap_window}]) >= {t.ib_flaps:g}",
              TICKET, f"InfiniBand link flapping: {port}",
              f"{port} went down {{{{ $value | humanize }}}} times in {t.ib_flap_window}.", for_="0m"),
        Alert("InfiniBandSymbolErrors",
              f"increase({metric('lockstep_ib_port_symbol_errors_total', sel)}[{t.ib_symbol_window}]) "
              f"> {t.ib_symbol_errors:g}",
              TICKET, f"InfiniBand symbol errors: {port}",
              f"{port} counted {{{{ $value | humanize }}}} symbol errors in {t.ib_symbol_window} "
              f"(threshold {t.ib_symbol_errors:g}): a marginal cable, transceiver or connector.", for_="5m"),
        Alert("InfiniBandLinkDegraded", _degraded(rate, sel, config.selectors.node),
              TICKET, f"InfiniBand link degraded: {port}",
              f"{port} runs at {{{{ $value | humanize1024 }}}}B/s, below its expected rate or the fastest "
              "port of the same HCA model on the node.", for_="10m"),
    ]


def _degraded(rate: str, sel: str, node_sel: str) -> str:
    """The agent's own verdict where --infiniband.expected-rate covers the port; elsewhere a port that
    trained below the fastest port of the same HCA model on its node (width or speed fell back). Not
    below the node's fastest port of any model: a 200 Gb/s storage NIC beside 400 Gb/s compute HCAs is
    slower by design."""
    typed = f"{rate} * on (node, device) group_left (hca_type) {metric('lockstep_ib_device_info', node_sel)}"
    expected = metric("lockstep_ib_port_expected_rate_bytes_per_second", sel)
    return (f"{rate} and on (node, device, port) ({metric('lockstep_ib_port_link_degraded', sel)} == 1)\n"
            f"or\n(\n  max without (hca_type) (\n    {typed}\n    < on (node, hca_type) group_left\n"
            f"    max by (node, hca_type) ({typed})\n  )\n  unless on (node, device, port) {expected}\n)")


def gpu(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.node
    where = "GPU {{ $labels.gpu }} on {{ $labels.node }}"
    xids = metric("lockstep_gpu_xid_errors_total", sel, f'xid=~"{t.critical_xids}"')
    # The agent creates a (gpu, xid) series at its first event, already at 1: increase() has no earlier
    # sample to count from, so a series that did not exist one window ago counts as new events too.
    w = t.gpu_event_window
    xid = f"(increase({xids}[{w}]) > 0 or ({xids} > 0 unless {xids} offset {w}))"
    uncorrected = metric("lockstep_gpu_ecc_errors_total", sel, 'type="uncorrected"')
    ecc = f"increase({uncorrected}[{t.gpu_event_window}]) > 0"
    failed = metric("lockstep_gpu_remapped_rows", sel, 'state="failed"')
    thermal = metric("lockstep_gpu_clock_event_active", sel, f'reason=~"{"|".join(THERMAL_REASONS)}"')
    return [
        Alert("GPUXidCritical", with_job(xid, "node, gpu", GPU_JOB), PAGE,
              f"Critical XID {{{{ $labels.xid }}}} on {where}",
              f"{where} reported XID {{{{ $labels.xid }}}} {{{{ $value | humanize }}}} times in {t.gpu_event_window}; "
              "the GPU needs a reset or replacement before it runs work again.", for_="0m"),
        Alert("GPUUncorrectableECC", with_job(ecc, "node, gpu", GPU_JOB), TICKET,
              f"Uncorrectable ECC errors on {where}",
              f"{where} counted {{{{ $value | humanize }}}} uncorrectable ECC errors in {t.gpu_event_window}.",
              for_="0m"),
        Alert("GPURowRemapFailure",
              with_job(f"{failed} == 1", "node, gpu", GPU_JOB),
              TICKET, f"Row remapping failed on {where}",
              f"{where} could not remap a failing HBM row: the GPU must be drained and replaced (RMA).", for_="0m"),
        Alert("GPUThermalThrottling",
              with_job(f"{thermal} == 1", "node, gpu", GPU_JOB), TICKET,
              f"Thermal throttling on {where}",
              f"{where} has been clocked down by {{{{ $labels.reason }}}}; the whole job runs at its pace.", for_="5m"),
        Alert("GPUFellOffBus", with_job(f"{metric('lockstep_gpu_up', sel)} == 0", "node, gpu", GPU_JOB), PAGE,
              f"GPU fell off the bus: {where}",
              f"{where} no longer answers NVML (GPU is lost, XID 79); its job cannot make progress.", for_="1m"),
    ]


def alerts(config: AlertsConfig) -> list[Alert]:
    return pfc(config) + infiniband(config) + gpu(config)
