"""Recording rules: the per-node/per-GPU rates and job-level aggregates that dashboards and the
alerts reuse, so a per-job query touches a few series instead of every raw counter of the cluster,
and a dashboard shows the rate an alert fires on, over the same window. The names of the recorded
series are the constants below; the dashboards import them.

Job membership comes from ``lockstep_gpu_job_info`` (one series per GPU held by a Slurm job). The
``node`` label is a target label (scrape config), so every join below is ``on (node, ...)``.
"""
from __future__ import annotations

from lockstep.alerts.model import Record, attach, metric
from lockstep.alerts.settings import AlertsConfig
from lockstep.exporters.catalog.enums import FLOOR, HISTORY, IB_PORT_ACTIVE, PEERS, THROTTLE_REASONS
from lockstep.exporters.catalog.recorded import (
    ANALYTICS_GROUP,
    ANALYTICS_INPUTS,
    ANALYTICS_STEP,
    ANALYTICS_STEP_LABEL,
    FLEET_INPUTS,
    FLEET_INPUTS_GROUP,
    FLEET_INPUTS_STEP,
    FLEET_LOADED,
    FLEET_LOADED_UTILIZATION,
    FLEET_POWER_CAPPED,
    FLEET_STEP_S,
)
from lockstep.exporters.toolkit.timeparse import duration_seconds

GROUP = "lockstep.rules"

GPU_JOB = "lockstep:gpu_job:info"
NODE_JOB = "lockstep:node_job:info"
JOB_GPUS = "lockstep:job_gpus:count"
GPU_SM_CLOCK = "lockstep:gpu_sm_clock:ratio"
INTERFACE_RAIL = "lockstep:interface_rail:info"
PFC_PAUSED = "lockstep:pfc_paused:ratio"                       # seconds paused per second, over pfc_window
PFC_PAUSED_INTERFACE = "lockstep:pfc_paused_interface:ratio"
PFC_STORM_EVENTS = "lockstep:pfc_storm_events:increase"        # watchdog events within pfc_window
FABRIC_PORT_HOST = "lockstep:fabric_port_host:info"              # a fabric port's host end: node and device
FABRIC_PORT = "lockstep:fabric_port:info"                       # ... with its own and its partner's names
SWITCH_PORT_HOST = "lockstep:switch_port_host:info"              # an Ethernet switch port's host: node, interface
SWITCH_PFC_PAUSED = "lockstep:switch_pfc_paused:ratio"            # seconds a switch port was paused per second
SWITCH_WATCHDOG = "lockstep:switch_pfc_watchdog:info"             # watchdog="stormed|operational" per priority
SWITCH_STORM_PORT = "lockstep:switch_storm_port:info"             # where a PFC storm enters the fabric ...
SWITCH_STORM_ORIGIN = "lockstep:switch_storm_origin:info"         # ... with the host and job behind it
NODE_RAIL_BYTES = "lockstep:node_rail_transmit_bytes:rate"        # over rail_imbalance_window
JOB_RAIL_BYTES = "lockstep:job_rail_transmit_bytes:rate"
JOB_RAIL_SHARE = "lockstep:job_rail_share:ratio"                  # a rail's bytes over the job's mean rail
JOB_RAIL_IMBALANCE = "lockstep:job_rail_imbalance:ratio"          # max / mean over the job's rails
UPLINK_BYTES = "lockstep:fabric_uplink_transmit_bytes:rate"       # a leaf's ports to spines
UPLINK_SHARE = "lockstep:fabric_uplink_share:ratio"
UPLINK_IMBALANCE = "lockstep:fabric_uplink_imbalance:ratio"       # max / mean over a leaf's uplinks
RACK_POWER = "lockstep:rack_power_watts:sum"
RACK_POWER_BUDGET = "lockstep:rack_power_budget:ratio"
JOB_LOST_GPU_SECONDS = "lockstep:job_lost_gpu_seconds:rate"    # over checkpoint_window
JOB_LOST_GPU_TIME = "lockstep:job_lost_gpu_time:ratio"
NODE_GPU_MODEL = "lockstep:node_gpu_model:info"                # one per node: its GPUs' model
VALIDATION_FIGURE = "lockstep:validation_figure:value"         # bandwidth and rate figures, with the model
VALIDATION_PEERS = "lockstep:validation_figure:peer_median"    # same model, test, scale, subject, figure
VALIDATION_RATIO = "lockstep:validation_figure:baseline_ratio"  # figure / baseline, by `baseline`
# One fleet answer: each GPU's state as a rank (FLEET_STATES, worst last), then counts any tool can read.
GPU_FLEET_STATE = "lockstep:gpu_fleet_state:rank"              # per GPU, with model and rack
GPU_FREE = "lockstep:gpu_free:bool"                            # 1: healthy, on an undrained node, in no job
FLEET_GPUS = "lockstep_fleet_gpus"                             # {model, rack, state}
FLEET_NODES = "lockstep_fleet_nodes"                           # {model, rack, state}: a node is its worst GPU
FLEET_FREE_GPUS = "lockstep_fleet_free_gpus"                   # {model}
FLEET_FREE_NODES = "lockstep_fleet_free_nodes"                 # {model}: every GPU free
FLEET_JOB_CAPACITY = "lockstep_fleet_job_capacity_gpus"        # {model}: GPUs in free whole nodes
FLEET_GPU_EVENTS = "lockstep_fleet_gpu_events"                 # {node, gpu, window}: hardware events
FLEET_INTERVAL = "1h"
FLEET_STATES = ("healthy", "degraded", "failed", "drained")
FLEET_WINDOWS = ("7d", "30d")
FLEET_GROUP = "lockstep.fleet.history"


def job_membership(config: AlertsConfig) -> list[Record]:
    """GPU→job and node→job maps, each unique on its join key so no join can go many-to-many."""
    info = metric("lockstep_gpu_job_info", config.selectors.node)
    return [
        # topk keeps one job per GPU even while a job hand-over briefly reports two.
        Record(GPU_JOB, f"max by (node, gpu, job_id) (topk by (node, gpu) (1, {info}))"),
        # A node shared by several jobs is attributed to the one holding most of its GPUs: multi-node
        # training jobs take whole nodes, and that job's collectives are what the node's NICs carry.
        Record(NODE_JOB,
               f"clamp_max(topk by (node) (1, count by (node, job_id) ({info})), 1)"),
        Record(JOB_GPUS, f"count by (job_id) ({info})"),
    ]


def _per_job(record: str, source: str, how: str = "avg") -> Record:
    join = f"* on (node, gpu) group_left (job_id) {GPU_JOB}"
    return Record(record, f"{how} by (job_id) (\n  {source}\n  {join}\n)")


def gpu(config: AlertsConfig) -> list[Record]:
    sel = config.selectors.node
    return [
        _per_job("lockstep:job_gpu_utilization:avg", metric("lockstep_gpu_utilization_ratio", sel)),
        _per_job("lockstep:job_gpu_sm_active:avg", metric("lockstep_gpu_sm_active_ratio", sel)),
        _per_job("lockstep:job_gpu_power_watts:sum", metric("lockstep_gpu_power_watts", sel), "sum"),
        Record(GPU_SM_CLOCK,
               f"{metric('lockstep_gpu_sm_clock_hertz', sel)}\n/ {metric('lockstep_gpu_sm_clock_max_hertz', sel)}"),
    ]


def fabric(config: AlertsConfig) -> list[Record]:
    sel, window = config.selectors.node, config.thresholds.pfc_window
    rail_info = metric("lockstep_fabric_rail_info", sel, 'interface!=""')
    storms = metric("lockstep_pfc_pause_storm_events_total", sel)
    paused = metric("lockstep_pfc_pause_duration_seconds_total", sel)
    node_rate = "sum by (node) (rate({}[{}]))"
    records = [
        Record(INTERFACE_RAIL, f"max by (node, interface, rail) ({rail_info})"),
        # Seconds paused per second: the fraction of wall time the priority was paused.
        Record(PFC_PAUSED, f"rate({paused}[{window}])"),
        # Per interface and priority (either direction), with the interface's rail where it is known.
        Record(PFC_PAUSED_INTERFACE,
               attach(f"max by (node, interface, priority) ({PFC_PAUSED})", "rail", "node, interface",
                      INTERFACE_RAIL, "node, interface, priority")),
        Record(PFC_STORM_EVENTS,
               attach(f"sum by (node, interface, level) (increase({storms}[{window}]))", "rail", "node, interface",
                      INTERFACE_RAIL, "node, interface, level")),
        Record("lockstep:node_ib_transmit_bytes:rate",
               node_rate.format(metric("lockstep_ib_port_transmit_bytes_total", sel), window)),
        Record("lockstep:node_ib_receive_bytes:rate",
               node_rate.format(metric("lockstep_ib_port_receive_bytes_total", sel), window)),
    ]
    for direction in ("transmit", "receive"):
        records.append(Record(
            f"lockstep:job_ib_{direction}_bytes:rate",
            f"sum by (job_id) (\n  lockstep:node_ib_{direction}_bytes:rate\n"
            f"  * on (node) group_left (job_id) {NODE_JOB}\n)"))
    return records


def switches(config: AlertsConfig) -> list[Record]:
    """The fabric exporter's ports with the names alerts show and the host behind each host link: for
    an HCA port its own node description, for a switch port cabled to an HCA its partner's, read as
    ``fabric_ca_description`` (host, device). Switch-to-switch ports have no host."""
    sel, pattern = config.selectors.fabric, config.thresholds.fabric_ca_description
    info = "lockstep_fabric_port_info"

    def host(kind: str, description: str) -> str:
        ports = metric(info, sel, kind)
        # Backquotes: a raw PromQL string, so the regex's backslashes stay as written.
        return (f'label_replace(label_replace({ports}, "node", "$1", "{description}", `{pattern}`), '
                f'"device", "$2", "{description}", `{pattern}`)')
    on_ca, on_switch = host('kind="ca"', "name"), host('kind="switch",remote_kind="ca"', "remote_name")
    # max by: the same port served twice (two exporters on one subnet) must not break the joins.
    names = f"max by (guid, port, name, remote_name, remote_guid, remote_port) ({metric(info, sel)})"
    return [
        Record(FABRIC_PORT_HOST, f"max by (guid, port, node, device) (\n  {on_ca}\n  or\n  {on_switch}\n)"),
        Record(FABRIC_PORT, attach(names, "node, device", "guid, port", FABRIC_PORT_HOST)),
    ]


def switch_pfc(config: AlertsConfig) -> list[Record]:
    """The Ethernet switches' view of a PFC storm (the switch exporter over gNMI) joined to the hosts.

    A storm starts at a host that stops draining and keeps pausing its switch port; the switch's buffers
    fill and it pauses its other ports in turn, so the storm spreads. Its origin is therefore the switch
    port paused (``direction="rx"``) by a *host* beyond ``pfc_paused_ratio`` of ``pfc_window``, or a queue
    the switch's own PFC watchdog holds as stormed; a switch port paused by another switch is a relay.
    The host behind a port comes from the switch exporter config's ``neighbors`` map (the cabling plan),
    joined to the node agents' ``node`` and netdev ``interface``. The watchdog watches queues, PFC pauses
    priorities: queue ``n`` is read as priority ``n``, SONiC's default lossless mapping (TC_TO_QUEUE
    identity for priorities 3 and 4)."""
    sel, t = config.selectors.switch, config.thresholds
    neighbors = metric("lockstep_switch_port_neighbor_info", sel, 'node!=""')
    duration = metric("lockstep_switch_pfc_pause_duration_seconds_total", sel)
    stormed = metric("lockstep_switch_pfc_watchdog_stormed", sel)

    def watchdog(test: str, state: str) -> str:
        by_priority = f'label_replace(max by (switch, port, queue) ({stormed}) {test}, "priority", "$1", "queue", "(.*)")'
        return f'label_replace({by_priority}, "watchdog", "{state}", "", "")'
    paused_by_host = (f'max by (switch, port, priority) ({SWITCH_PFC_PAUSED}{{direction="rx"}}) > {t.pfc_paused_ratio:g}\n'
                      f"and on (switch, port) {SWITCH_PORT_HOST}")
    held = f'max by (switch, port, priority) ({SWITCH_WATCHDOG}{{watchdog="stormed"}})'
    host = attach(SWITCH_STORM_PORT, "node, interface", "switch, port", SWITCH_PORT_HOST, "switch, port, priority")
    return [
        Record(SWITCH_PORT_HOST, f"max by (switch, port, node, interface) ({neighbors})"),
        Record(SWITCH_PFC_PAUSED, f"rate({duration}[{t.pfc_window}])"),
        Record(SWITCH_WATCHDOG, f"max by (switch, port, priority, watchdog) (\n  {watchdog('== 1', 'stormed')}\n  or\n"
                                f"  {watchdog('== 0', 'operational')} + 1\n)"),
        # Its value: the fraction of the window the host paused the port (1 where only the watchdog saw it).
        # Whether the watchdog acted stays out of its labels (the page's annotations read it), so the alert
        # keeps its identity, and its for:, when the watchdog steps in.
        Record(SWITCH_STORM_PORT, f"{paused_by_host}\nor\n{held}"),
        Record(SWITCH_STORM_ORIGIN, attach(host, "job_id", "node", NODE_JOB, "switch, port, priority")),
    ]


def imbalance(config: AlertsConfig) -> list[Record]:
    """How evenly traffic spreads over parallel paths, as max/mean over a group (1: even) and each member's
    share of the group's mean. Rails: a job's transmit bytes per rail, from its nodes' HCAs (the node agent's
    port counters, the rail from ``lockstep_fabric_rail_info``). Uplinks (ECMP): a leaf's ports to other
    switches, from the fabric exporter; a leaf is a switch with a host cabled to it, so a spine's ports to
    the leaves, whose split the destinations decide, are no group."""
    node, fabric, window = config.selectors.node, config.selectors.fabric, config.thresholds.rail_imbalance_window
    railed = metric("lockstep_fabric_rail_info", node, 'rail!=""')
    rails = f"max by (node, device, rail) ({railed})"
    hca = metric("lockstep_ib_port_transmit_bytes_total", node)
    to_switch = metric("lockstep_fabric_port_info", fabric, 'kind="switch",remote_kind="switch"')
    to_host = metric("lockstep_fabric_port_info", fabric, 'kind="switch",remote_kind="ca"')
    uplinks = f"max by (guid, port, name, remote_name) ({to_switch})\nand on (guid) count by (guid) ({to_host})"
    switch_tx = metric("lockstep_fabric_port_transmit_bytes_total", fabric)

    def spread(bytes_: str, share: str, ratio: str, group: str) -> list[Record]:
        return [Record(share, f"{bytes_}\n/ on ({group}) group_left avg by ({group}) ({bytes_})"),
                Record(ratio, f"max by ({group}) ({bytes_})\n/ avg by ({group}) ({bytes_})")]
    return [
        Record(NODE_RAIL_BYTES, f"sum by (node, rail) (\n  rate({hca}[{window}])\n"
                                f"  * on (node, device) group_left (rail) {rails}\n)"),
        Record(JOB_RAIL_BYTES, f"sum by (job_id, rail) (\n  {NODE_RAIL_BYTES}\n  * on (node) group_left (job_id) {NODE_JOB}\n)"),
        *spread(JOB_RAIL_BYTES, JOB_RAIL_SHARE, JOB_RAIL_IMBALANCE, "job_id"),
        Record(UPLINK_BYTES, f"rate({switch_tx}[{window}])\n* on (guid, port) group_left (name, remote_name) (\n{uplinks}\n)"),
        *spread(UPLINK_BYTES, UPLINK_SHARE, UPLINK_IMBALANCE, "guid, name"),
    ]


def power(config: AlertsConfig) -> list[Record]:
    sel = config.selectors.power
    budget = metric("lockstep_rack_power_budget_watts", sel)
    return [
        Record(RACK_POWER, f"sum by (rack) ({metric('lockstep_pdu_power_watts', sel)})"),
        Record(RACK_POWER_BUDGET,
               f"{RACK_POWER}\n/ on (rack) max by (rack) ({budget})"),
    ]


def analytics(config: AlertsConfig) -> list[Record]:
    sel, window = config.selectors.analytics, config.thresholds.checkpoint_window
    lost = metric("lockstep_job_lost_gpu_seconds_total", sel)
    return [
        Record(JOB_LOST_GPU_SECONDS, f"sum by (job_id, cause) (rate({lost}[{window}]))"),
        # Lost over allocated GPU time per cause, over the checkpoint window.
        Record(JOB_LOST_GPU_TIME, f"{JOB_LOST_GPU_SECONDS}\n/ on (job_id) group_left {JOB_GPUS}"),
    ]


def validation(config: AlertsConfig) -> list[Record]:
    """Each validation figure (bandwidths and rates: higher is better) over its baselines, as one ratio
    series per baseline: its own history (served by the node agent), its peers (the median over nodes of
    the same GPU model with the same test, scale, subject and figure, when there are enough of them) and
    the configured floors (expected hardware figures)."""
    sel, t = config.selectors.node, config.thresholds
    families = [(metric("lockstep_validation_bandwidth_bytes_per_second", sel),
                 metric("lockstep_validation_bandwidth_baseline_bytes_per_second", sel, f'source="{HISTORY}"')),
                (metric("lockstep_validation_operations_per_second", sel),
                 metric("lockstep_validation_operations_baseline_per_second", sel, f'source="{HISTORY}"'))]
    peers = "kind, test, scale, subject, figure, model"
    records = [
        Record(NODE_GPU_MODEL, 'label_replace(clamp_max(topk by (node) (1, count by (node, name) '
                               f'({metric("lockstep_gpu_info", sel)})), 1), "model", "$1", "name", "(.*)")'),
        Record(VALIDATION_FIGURE, f"(\n  {families[0][0]}\n  or {families[1][0]}\n)\n"
                                  f"* on (node) group_left (model) {NODE_GPU_MODEL}"),
        Record(VALIDATION_PEERS, f"quantile by ({peers}) (0.5, {VALIDATION_FIGURE})\nand on ({peers})\n"
                                 f"count by ({peers}) ({VALIDATION_FIGURE}) >= {t.validation_min_peers:g}"),
        Record(VALIDATION_RATIO, "\nor\n".join(f"{value} / ignoring (source) {base}" for value, base in families),
               (("baseline", HISTORY),)),
        Record(VALIDATION_RATIO, f"{VALIDATION_FIGURE}\n/ on ({peers}) group_left {VALIDATION_PEERS}",
               (("baseline", PEERS),)),
    ]
    for floor in config.validation_floors:
        picked = " or ".join(metric(name, sel, floor.match) for name in (
            "lockstep_validation_bandwidth_bytes_per_second", "lockstep_validation_operations_per_second"))
        records.append(Record(VALIDATION_RATIO, f"({picked}) / {floor.min:g}", (("baseline", FLOOR),)))
    return records


def analytics_inputs(config: AlertsConfig) -> list[Record]:
    """The analytics service's inputs that the TSDB reduces from several raw series, each recorded as one
    series per rank (GPU, HCA) or node at the analytics' step: the input's own query
    (``lockstep.analytics.frame.inputs``) over every node, so a refresh of a 65,536-GPU job reads one
    series per rank and input. Rates span two steps, as the service's own queries do."""
    sel = config.selectors.node
    span = f"{round(2 * duration_seconds(config.analytics_step) * 1000)}ms"

    def irate(name: str) -> str:
        return f"irate({metric(name, sel)}[{span}])"

    def summed(by: str, name: str) -> str:
        return f"sum by ({by}) ({irate(name)})"

    links = " or ".join([f"{metric('lockstep_ib_port_state', sel)} != {IB_PORT_ACTIVE}"] + [
        f"{irate(m)} > 0" for m in ("lockstep_ib_port_link_downed_total", "lockstep_ib_port_link_error_recovery_total",
                                    "lockstep_ib_port_symbol_errors_total")])
    reasons = metric("lockstep_gpu_clock_event_active", sel, f'reason=~"{"|".join(THROTTLE_REASONS)}"')
    all_reduce = metric("lockstep_nccl_inspector_collective_exec_time_seconds", sel, 'collective=~"AllReduce"')
    exprs = {
        "clock": f"max by (node, gpu) ({metric('lockstep_gpu_sm_clock_hertz', sel)} / "
                 f"({metric('lockstep_gpu_sm_clock_max_hertz', sel)} > 0))",
        "reasons": f"group by (node, gpu, reason) ({reasons} > 0)",
        "tx": summed("node, device", "lockstep_ib_port_transmit_bytes_total"),
        "xmit_wait": summed("node, device", "lockstep_ib_port_transmit_wait_total"),
        "link": f"group by (node, device) ({links})",
        "read": summed("node", "lockstep_storage_read_bytes_total"),
        "write": summed("node", "lockstep_storage_write_bytes_total"),
        "pause": summed("node", "lockstep_pfc_pause_duration_seconds_total"),
        "cnp": summed("node", "lockstep_roce_cnp_handled_total"),
        "collective": f"max by (node, gpu, job_id) ({all_reduce})",
    }
    step = Record(ANALYTICS_STEP, f"vector({duration_seconds(config.analytics_step):g})",
                  ((ANALYTICS_STEP_LABEL, ",".join(exprs)),))
    return [step] + \
        [Record(ANALYTICS_INPUTS[name], expr) for name, expr in exprs.items()]


def fleet_inputs(config: AlertsConfig) -> list[Record]:
    """The fleet pass's inputs recorded every ``FLEET_STEP_S``: each feature's per-GPU value while the GPU is
    loaded, the expression the pass's subqueries evaluate at each step (``lockstep.analytics.frame.peers``
    ``loaded_inputs``; a test holds the two equal), and the loaded utilization. The pass reads them where they
    cover its window."""
    def sel(name: str) -> str:
        return metric(name, config.selectors.node)

    def ratio(num: str, den: str) -> str:
        return f"{sel(num)} / ({sel(den)} > 0)"

    loaded = f"{sel('lockstep_gpu_utilization_ratio')} >= {FLEET_LOADED_UTILIZATION}"
    power = ratio("lockstep_gpu_power_watts", "lockstep_gpu_power_limit_watts")
    features = {
        "sm_clock": f"({ratio('lockstep_gpu_sm_clock_hertz', 'lockstep_gpu_sm_clock_max_hertz')}) and on (node, gpu) "
                    f"({power} < {FLEET_POWER_CAPPED})",
        "power": f"({power}) / ({sel('lockstep_gpu_sm_active_ratio')} > 0)",
        "temperature_c": sel("lockstep_gpu_temperature_celsius"),
        "power_w": sel("lockstep_gpu_power_watts"),
        "pcie": f"({ratio('lockstep_gpu_pcie_link_width', 'lockstep_gpu_pcie_link_width_max')}) * 2 ^ "
                f"({sel('lockstep_gpu_pcie_link_generation')} - {sel('lockstep_gpu_pcie_link_generation_max')})",
    }
    return [Record(FLEET_INPUTS_STEP, f"vector({FLEET_STEP_S:g})"), Record(FLEET_LOADED, loaded)] + \
        [Record(FLEET_INPUTS[name], f"({expr}) and on (node, gpu) ({loaded})") for name, expr in features.items()]


def fleet(config: AlertsConfig) -> list[Record]:
    """Is the fleet good: each GPU healthy (0), degraded (1: a health check warns, or the analytics
    service's peer verdict), failed (2: a health check failed, or the GPU is lost) or drained (3: its
    node is held by the quarantine receiver), with its model and the ``rack`` target label its node agent's
    scrape config may set beside ``node`` (empty where it sets none); the counts by model, rack and state, for GPUs and nodes
    (a node is its worst GPU); and what is free for the next job, which takes whole nodes."""
    node, sel = config.selectors.node, config.selectors
    model = f'label_replace(max by (node, gpu, name, rack) ({metric("lockstep_gpu_info", node)}), "model", "$1", "name", "(.*)")'
    health = f'max by (node, gpu) ({metric("lockstep_gpu_health", node)})'
    failed = f'{health} == 2\nor max by (node, gpu) ({metric("lockstep_gpu_up", node)}) == 0'
    degraded = f'{health} == 1\nor max by (node, gpu) ({metric("lockstep_gpu_peer_degraded", sel.analytics)}) == 1'
    drained = f'max by (node) ({metric("lockstep_fleet_node_drained", sel.quarantine)}) == 1'
    base = f"max by (node, gpu, model, rack) ({model})"
    rank = (f"(\n  (0 * {base})\n  + on (node, gpu) group_left () (\n"
            f"    (3 * ({drained}) * on (node) group_right () (0 * {base} + 1))\n"
            f"    or on (node, gpu) 2 * (({failed}) * 0 + 1)\n"
            f"    or on (node, gpu) (({degraded}) * 0 + 1)\n"
            f"    or on (node, gpu) (0 * {base})\n  )\n)")
    node_rank = f"max by (node, model, rack) ({GPU_FLEET_STATE})"
    records = [Record(GPU_FLEET_STATE, rank)]
    for value, state in enumerate(FLEET_STATES):
        records += [Record(FLEET_GPUS, f"count by (model, rack) ({GPU_FLEET_STATE} == {value})", (("state", state),)),
                    Record(FLEET_NODES, f"count by (model, rack) ({node_rank} == {value})", (("state", state),))]
    per_node = f"count by (node, model) ({GPU_FREE})"
    records += [
        Record(GPU_FREE, f"({GPU_FLEET_STATE} == bool 0) unless on (node, gpu) {GPU_JOB}\n"
                         f"or on (node, gpu) 0 * {GPU_FLEET_STATE}"),
        Record(FLEET_FREE_GPUS, f"sum by (model) ({GPU_FREE})"),
        Record(FLEET_FREE_NODES, f"count by (model) (min by (node, model) ({GPU_FREE}) == 1)"),
        Record(FLEET_JOB_CAPACITY, f"sum by (model) (\n  {per_node}\n  and on (node) (min by (node) ({GPU_FREE}) == 1)\n)"),
    ]
    return records


def fleet_history(config: AlertsConfig) -> list[Record]:
    """Hardware events per GPU (warning and critical XIDs, uncorrectable ECC errors) over 7 and 30 days: the
    repeat offenders among GPUs. In a group of its own evaluated hourly: a window's raw counters are read
    once an hour, not at every evaluation (and the figure does not depend on how often it is evaluated)."""
    node = config.selectors.node
    xid = metric("lockstep_gpu_xid_errors_total", node, 'severity=~"warning|critical"')
    ecc = metric("lockstep_gpu_ecc_errors_total", node, 'type="uncorrected"')
    return [Record(FLEET_GPU_EVENTS, f"sum by (node, gpu) (\n  increase({xid}[{w}])\n  or increase({ecc}[{w}])\n)",
                   (("window", w),)) for w in FLEET_WINDOWS]


def groups(config: AlertsConfig) -> list[dict]:
    rules = (job_membership(config) + gpu(config) + fabric(config) + switches(config) + switch_pfc(config)
             + imbalance(config) + power(config)
             + analytics(config) + validation(config) + fleet(config))
    return [{"name": GROUP, "interval": config.evaluation_interval, "rules": [r.render() for r in rules]},
            {"name": ANALYTICS_GROUP, "interval": config.analytics_step,
             "rules": [r.render() for r in analytics_inputs(config)]},
            {"name": FLEET_INPUTS_GROUP, "interval": f"{FLEET_STEP_S:g}s",
             "rules": [r.render() for r in fleet_inputs(config)]},
            {"name": FLEET_GROUP, "interval": FLEET_INTERVAL, "rules": [r.render() for r in fleet_history(config)]}]
