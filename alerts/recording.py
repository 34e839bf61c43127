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
from lockstep.exporters.catalog.enums import FLOOR, HISTORY, PEERS

GROUP = "lockstep.rules"

GPU_JOB = "lockstep:gpu_job:info"
NODE_JOB = "lockstep:node_job:info"
JOB_GPUS = "lockstep:job_gpus:count"
GPU_SM_CLOCK = "lockstep:gpu_sm_clock:ratio"
INTERFACE_RAIL = "lockstep:interface_rail:info"
PFC_PAUSED = "lockstep:pfc_paused:ratio"                       # seconds paused per second, over pfc_window
PFC_PAUSED_INTERFACE = "lockstep:pfc_paused_interface:ratio"
PFC_STORM_EVENTS = "lockstep:pfc_storm_events:increase"        # watchdog events within pfc_window
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
    rules = (job_membership(config) + gpu(config) + fabric(config) + power(config) + analytics(config)
             + validation(config) + fleet(config))
    return [{"name": GROUP, "interval": config.evaluation_interval, "rules": [r.render() for r in rules]},
            {"name": FLEET_GROUP, "interval": FLEET_INTERVAL, "rules": [r.render() for r in fleet_history(config)]}]
