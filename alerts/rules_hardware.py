"""Alerts on the hardware the node agents watch: PFC, InfiniBand ports, GPUs, local NVMe drives.

Fabric and GPU alerts carry the ``job_id`` of the job on the faulty part where there is one (joined
through the recorded ``lockstep:node_job:info`` / ``lockstep:gpu_job:info``). That label is the
inhibition plumbing: Alertmanager mutes a job's straggler and stall alerts while a PFCPauseStorm
with the same ``job_id`` fires (see ``alertmanager.py``).
"""
from __future__ import annotations

from lockstep.alerts.model import Alert, attach, metric, with_job
from lockstep.alerts.recording import (
    FABRIC_PORT,
    GPU_JOB,
    JOB_RAIL_BYTES,
    JOB_RAIL_SHARE,
    NODE_JOB,
    PFC_PAUSED_INTERFACE,
    PFC_STORM_EVENTS,
    SWITCH_PORT_HOST,
    SWITCH_STORM_ORIGIN,
    SWITCH_WATCHDOG,
)
from lockstep.alerts.settings import AlertsConfig
from lockstep.exporters.catalog import storagesys
from lockstep.exporters.catalog.enums import (
    IB_PORT_ACTIVE,
    IB_PORT_STATES,
    PAGE,
    THERMAL_REASONS,
    TICKET,
    XID_CRITICAL,
    XID_TICKET_CATEGORIES,
    XID_WARNING,
)

# The switches' view in every storm page: where the storm enters the fabric (lockstep.alerts.recording.switch_pfc).
_ORIGINS = (f'{{{{ with query "{SWITCH_STORM_ORIGIN}" }}}} Origin seen by the switches:'
            '{{ range . }} {{ .Labels.switch }} port {{ .Labels.port }} priority {{ .Labels.priority }}'
            '{{ with .Labels.node }} (host {{ . }}{{ end }}{{ with .Labels.job_id }}, job {{ . }}{{ end }}'
            '{{ with .Labels.node }}){{ end }};{{ end }}{{ end }}')
# The jobs on every host cabled to the origin's switch: who else the storm holds up.
_BEHIND = (f'{{{{ range $i, $s := query (printf "count by (job_id) ({SWITCH_PORT_HOST}{{switch=%q}} '
           f'* on (node) group_left (job_id) {NODE_JOB})" $labels.switch) | sortByLabel "job_id" }}}}'
           '{{ if $i }}, {{ else }} Jobs behind {{ $labels.switch }}: {{ end }}{{ $s.Labels.job_id }}{{ end }}')

# Whether the switch's PFC watchdog already acted on the origin's queue (queue n read as priority n).
_WATCHDOG = (f'{{{{ range query (printf "{SWITCH_WATCHDOG}{{switch=%q,port=%q,priority=%q}}" $labels.switch '
             '$labels.port $labels.priority) }}{{ if eq .Labels.watchdog "stormed" }} The switch\'s PFC watchdog has '
             'already acted: it holds the queue as stormed and drops or forwards its traffic instead of honouring '
             'the pauses.{{ else }} The switch\'s PFC watchdog has not acted (the queue is operational): the storm '
             'still spreads.{{ end }}{{ else }} The switch publishes no PFC watchdog state for this queue.{{ end }}')


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
              f"through it waits.{_ORIGINS}",
              (("signal", "paused_time"),), for_="30s"),
        # The NIC's own watchdog: it kept sending pauses too long (its host is the source) and, at
        # level=error, stopped sending them (it drops instead).
        Alert("PFCPauseStorm", with_job(storms, "node", NODE_JOB, "node, interface, level"), PAGE,
              "PFC storm watchdog fired on {{ $labels.node }} {{ $labels.interface }}",
              "The {{ $labels.level }} pause-storm watchdog of {{ $labels.interface }} on {{ $labels.node }} fired "
              f"{{{{ $value }}}} times in the last {t.pfc_window}.{_ORIGINS}",
              (("signal", "watchdog"),), for_="30s"),
        # The switches' view: the port where the storm enters the fabric, the host and job behind it.
        Alert("PFCPauseStorm", SWITCH_STORM_ORIGIN, PAGE,
              "PFC pause storm origin: {{ $labels.switch }} port {{ $labels.port }} priority {{ $labels.priority }}"
              "{{ with $labels.node }} ({{ . }} {{ $labels.interface }}){{ end }}",
              "{{ $labels.switch }} port {{ $labels.port }} is where the storm enters the fabric on priority "
              "{{ $labels.priority }}: {{ with $labels.node }}its host {{ . }} {{ $labels.interface }} keeps pausing "
              "it without draining{{ with $labels.job_id }} (job {{ . }}){{ end }}{{ else }}its queue is stormed"
              f"{{{{ end }}}}. Pauses spread from here to the switch's other ports and beyond.{_WATCHDOG}{_BEHIND}",
              (("signal", "switch_origin"),), for_="30s"),
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


def _link(config: AlertsConfig, state: str) -> str:
    """Ports whose fabric-exporter verdict is ``state``, with their names and link partner, the host and
    device behind a host link and the job on that host (none for a switch-to-switch link)."""
    health = metric("lockstep_link_health", config.selectors.fabric, f'state="{state}"')
    verdict = f"{health} == 1"
    labels = "name, remote_name, remote_guid, remote_port, node, device"
    return with_job(attach(verdict, labels, "guid, port", FABRIC_PORT), "node", NODE_JOB, "guid, port")


def fabric(config: AlertsConfig) -> list[Alert]:
    """The fabric exporter's link-health verdicts (exporters/switches/linkhealth.py). A host link's two
    ends both carry the host's ``node`` and ``device``; a switch-to-switch link has neither."""
    port = "{{ $labels.name }} port {{ $labels.port }}"
    partner = "{{ with $labels.remote_name }} (to {{ . }} port {{ $labels.remote_port }}){{ end }}"
    host = "{{ with $labels.node }} Host behind it: {{ . }} {{ $labels.device }}.{{ end }}"
    reasons = "lockstep_link_health_reason{guid=\"{{ $labels.guid }}\",port=\"{{ $labels.port }}\"}"
    return [
        Alert("LinkFailed", _link(config, "failed"), PAGE, f"InfiniBand link failed: {port}",
              f"{port}{partner} went down or overran its buffers within the fatal window (the reasons: {reasons})."
              f"{host} Every collective of the job on it stalls or aborts; the host is a quarantine candidate.",
              for_="0m"),
        Alert("LinkDegraded", _link(config, "degraded"), TICKET, f"InfiniBand link degraded: {port}",
              f"{port}{partner} is over its bit-error budget, recovers too often or runs below its expected rate "
              f"(the reasons: {reasons}).{host} A marginal cable or transceiver: replace it before it fails.",
              for_="5m"),
    ]


def rails(config: AlertsConfig) -> list[Alert]:
    """A job's traffic unevenly spread over its rails (lockstep.alerts.recording.imbalance): the job runs at
    the pace of its busiest rail."""
    t = config.thresholds
    busy = f"avg by (job_id) ({JOB_RAIL_BYTES}) > {t.rail_imbalance_min_bytes_per_second:g}"
    return [
        Alert("FabricRailImbalance", f"{JOB_RAIL_SHARE} > {t.rail_imbalance_factor:g}\nand on (job_id) {busy}", TICKET,
              "Rail {{ $labels.rail }} carries {{ $value | printf \"%.2f\" }}x its share of job {{ $labels.job_id }}",
              "Rail {{ $labels.rail }} carried {{ $value | printf \"%.2f\" }} times the mean bytes of job "
              f"{{{{ $labels.job_id }}}}'s rails over the last {t.rail_imbalance_window} (threshold "
              f"{t.rail_imbalance_factor:g}): every collective waits for its busiest rail. An HCA missing or down "
              "on some of the job's nodes, NCCL_IB_HCA not naming every rail, or traffic moved off a degraded link.",
              for_="15m"),
    ]


def _new_events(counter: str, window: str) -> str:
    """Events within ``window``. The agent creates a (gpu, xid) series at its first event, already at 1:
    increase() has no earlier sample to count from, so a series that did not exist one window ago counts
    as new events too."""
    return f"(increase({counter}[{window}]) > 0 or ({counter} > 0 unless {counter} offset {window}))"


def gpu(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.node
    where = "GPU {{ $labels.gpu }} on {{ $labels.node }}"
    w = t.gpu_event_window
    # Which XIDs page or ticket is the XID catalog's call (severity, category), never a list of codes here.
    critical = _new_events(metric("lockstep_gpu_xid_errors_total", sel, f'severity="{XID_CRITICAL}"'), w)
    handled = metric("lockstep_gpu_xid_errors_total", sel,
                     f'severity="{XID_WARNING}",category=~"{"|".join(XID_TICKET_CATEGORIES)}"')
    uncorrected = metric("lockstep_gpu_ecc_errors_total", sel, 'type="uncorrected"')
    ecc = f"increase({uncorrected}[{t.gpu_event_window}]) > 0"
    failed = metric("lockstep_gpu_remapped_rows", sel, 'state="failed"')
    pending = metric("lockstep_gpu_remapped_rows", sel, 'state="pending"')
    thermal = metric("lockstep_gpu_clock_event_active", sel, f'reason=~"{"|".join(THERMAL_REASONS)}"')
    missing = f"{metric('lockstep_node_gpus_expected', sel)} - {metric('lockstep_node_gpus_visible', sel)} > 0"
    xid = "XID {{ $labels.xid }} ({{ $labels.category }})"
    return [
        Alert("GPUXidCritical", with_job(critical, "node, gpu", GPU_JOB), PAGE,
              f"Critical XID {{{{ $labels.xid }}}} on {where}",
              f"{where} reported {xid} {{{{ $value | humanize }}}} times in {w}. NVIDIA's recovery action: "
              "{{ $labels.action }}; the GPU must take no new work until it is done.", for_="0m"),
        Alert("GPUXidWarning", with_job(_new_events(handled, w), "node, gpu", GPU_JOB), TICKET,
              f"XID {{{{ $labels.xid }}}} on {where}",
              f"{where} reported {xid} {{{{ $value | humanize }}}} times in {w}; the GPU handled it (NVIDIA's "
              "action: {{ $labels.action }}). Repeats point at failing hardware.", for_="0m"),
        Alert("GPUUncorrectableECC", with_job(ecc, "node, gpu", GPU_JOB), TICKET,
              f"Uncorrectable ECC errors on {where}",
              f"{where} counted {{{{ $value | humanize }}}} uncorrectable ECC errors in {t.gpu_event_window}.",
              for_="0m"),
        Alert("GPURowRemapFailure",
              with_job(f"{failed} == 1", "node, gpu", GPU_JOB),
              TICKET, f"Row remapping failed on {where}",
              f"{where} could not remap a failing HBM row: the GPU must be drained and replaced (RMA).", for_="0m"),
        Alert("GPURowRemapPending",
              with_job(f"{pending} == 1", "node, gpu", GPU_JOB),
              TICKET, f"Row remap pending on {where}",
              f"{where} marked an HBM row for remapping after a memory error; the spare row takes over at the next "
              "GPU reset, until then the failing row may be used again. Drain the node and reset the GPU.", for_="0m"),
        Alert("GPUThermalThrottling",
              with_job(f"{thermal} == 1", "node, gpu", GPU_JOB), TICKET,
              f"Thermal throttling on {where}",
              f"{where} has been clocked down by {{{{ $labels.reason }}}}; the whole job runs at its pace.", for_="5m"),
        Alert("GPUFellOffBus", with_job(f"{metric('lockstep_gpu_up', sel)} == 0", "node, gpu", GPU_JOB), PAGE,
              f"GPU fell off the bus: {where}",
              f"{where} no longer answers NVML (GPU is lost, XID 79); its job cannot make progress.", for_="1m"),
        Alert("GPUMissing", with_job(missing, "node", NODE_JOB), PAGE,
              "GPU missing on {{ $labels.node }}",
              "{{ $labels.node }} shows {{ $value }} GPU(s) fewer than it should have (lockstep_node_gpus_expected): a "
              "GPU that did not come up at boot, fell off the bus and was removed, or a driver that did not load. "
              "A job placed there would run short of GPUs.", for_="2m"),
    ]


def nvme(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.node
    used = metric("lockstep_nvme_percentage_used_ratio", sel)
    spare = metric("lockstep_nvme_available_spare_ratio", sel)
    spare_min = metric("lockstep_nvme_available_spare_threshold_ratio", sel)
    where = "NVMe {{ $labels.controller }} on {{ $labels.node }}"
    return [
        Alert("NVMeWearing", with_job(f"{used} >= {t.nvme_wear_ratio:g}", "node", NODE_JOB, "node, controller"), TICKET,
              f"{where} is wearing out",
              f"{where} has used {{{{ $value | humanizePercentage }}}} of its rated write endurance (SMART Percentage "
              "Used); plan its replacement before it goes read-only.", (("signal", "wear"),), for_="15m"),
        Alert("NVMeWearing", with_job(f"{spare} <= {spare_min}", "node", NODE_JOB,
                                      "node, controller"), TICKET,
              f"{where} is out of spare blocks",
              f"{where} has {{{{ $value | humanizePercentage }}}} spare capacity left, at or below its own threshold "
              "(SMART Available Spare): the drive is failing.", (("signal", "spare"),), for_="15m"),
    ]


def gpfs(config: AlertsConfig) -> list[Alert]:
    """Spectrum Scale clients: a daemon thread waiting too long (mmdiag --waiters)."""
    t, sel = config.thresholds, config.selectors.node
    oldest = metric("lockstep_gpfs_waiter_oldest_seconds", sel)
    return [
        Alert("GPFSClientStalled", with_job(f"{oldest} > {t.gpfs_waiter_seconds:g}", "node", NODE_JOB, "node"), TICKET,
              "GPFS client stalled on {{ $labels.node }}",
              "A GPFS daemon thread on {{ $labels.node }} has waited {{ $value | humanizeDuration }} (mmdiag --waiters; "
              f"threshold {t.gpfs_waiter_seconds:g} s): I/O to Spectrum Scale from this node is stuck and the job "
              "reading or checkpointing there waits with it.", for_="5m"),
    ]


def storage_systems(config: AlertsConfig) -> list[Alert]:
    """The storage exporter's systems: the mean latency of an operation on a bucket, file system, view or cluster.
    One client host's share (scope host) is left out: a slow system is one ticket, not one per client."""
    t, sel, w = config.thresholds, config.selectors.storage, config.thresholds.storage_latency_window
    by, systems = "job, target, scope, name, op", f'scope!="{storagesys.HOST_SCOPE}"'
    spent = f'sum by ({by}) (rate({metric("lockstep_storage_system_operation_latency_seconds_total", sel, systems)}[{w}]))'
    done = f'sum by ({by}) (rate({metric("lockstep_storage_system_operations_total", sel, systems)}[{w}]))'
    where = "{{ $labels.op }} on {{ $labels.target }} {{ $labels.scope }} {{ $labels.name }}"
    return [
        Alert("StorageLatencyHigh", f"{spent}\n/ ({done} > 0)\n> {t.storage_latency_seconds:g}", TICKET,
              f"Slow storage: {where}",
              f"{where} took {{{{ $value | humanizeDuration }}}} per operation on average over {w} "
              f"(threshold {t.storage_latency_seconds:g} s): the jobs reading or checkpointing there wait for it.",
              for_="15m"),
    ]


def alerts(config: AlertsConfig) -> list[Alert]:
    return (pfc(config) + infiniband(config) + fabric(config) + rails(config) + gpu(config) + nvme(config)
            + gpfs(config) + storage_systems(config))
