"""Training job (variable ``job_id``): who holds the job back and why. Straggler ranking with the
evidence and cause next to the score, per-GPU activity (the straggler stands out), the three views of pace
ranking the ranks (step times, NCCL Inspector's collective arrival, GPU activity), imbalance (GPUs off
the job's median pace since they started, why, and the GPU-hours the others spend waiting for them),
step pace, stalls by cause, job-wide slowdowns by cause, lost GPU-hours by cause, the goodput ledger,
and the rails and storage the job's nodes use, with the job's own I/O and I/O pressure from its cgroup."""
from __future__ import annotations

from lockstep.alerts import recording as r
from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards.config import Config, range_total, rate, sel
from lockstep.dashboards.grafana import dashboard, data_link, query_variable, target
from lockstep.exporters.catalog import analytics, fabric, gpu, nccl_inspector, pace, storage
from lockstep.exporters.catalog.enums import (
    CHECKPOINT,
    HANG,
    MEMBER_LOST,
    NETWORK,
    RANK_DEAD,
    RANK_STOPPED,
    STORAGE,
    STRAGGLER,
)

NAME = "job"
CAUSE_COLOURS = {CHECKPOINT: "blue", NETWORK: "purple", STORAGE: "orange", STRAGGLER: "yellow", HANG: "red",
                 MEMBER_LOST: "dark-red", RANK_STOPPED: "dark-orange", RANK_DEAD: "dark-purple"}


def _summary(cfg: Config) -> list:
    a = cfg.selectors.analytics
    lost = f"sum({rate(cfg, analytics.JOB_LOST_GPU_SECONDS, a, q.JOB)})"
    return [
        p.stat("GPUs allocated", [target(f"sum({sel(r.JOB_GPUS, q.JOB)})")], "short"),
        p.stat("Goodput", [target(f"max({sel(analytics.JOB_GOODPUT, a, q.JOB)})")], "percentunit",
               thresholds=(("red", None), ("orange", 0.8), ("green", 0.9))),
        p.stat("Stalled now", [target(f"max({sel(analytics.JOB_STALLED, a, q.JOB)})")], "bool_yes_no",
               thresholds=p.OK_BAD),
        p.stat("Lost GPU-hours (range)", [target(f"{range_total(cfg, lost)} / 3600")], "suffix: GPU-h",
               thresholds=(("green", None), ("orange", 1))),
        # Straggler score = speed against the rank's own usual pace among its peers.
        p.stat("Slowest rank (speed vs its usual)", [target(f"min({sel(analytics.STRAGGLER_SCORE, a, q.JOB)})")],
               "percentunit", thresholds=(("red", None), ("orange", 0.75), ("green", 0.9))),
        # Synchronous data parallelism: the job steps at the pace of its slowest rank.
        p.stat("Step rate", [target(f"1 / max({sel(analytics.RANK_STEP_SECONDS, cfg.selectors.training, q.JOB)})")],
               "suffix: steps/s"),
    ]


def _stragglers(cfg: Config) -> list:
    n, a = cfg.selectors.node, cfg.selectors.analytics
    clock = q.job_gpus(cfg, r.GPU_SM_CLOCK)
    reasons = q.job_gpus(cfg, f"{sel(gpu.CLOCK_EVENT, n, q.throttle_matcher())} == 1")
    ranking = p.table("Straggler ranking", [
        target(f"bottomk(20, min by (node, gpu) ({sel(analytics.STRAGGLER_SCORE, a, q.JOB)}))", instant=True, table=True),
        target(f"max by (node, gpu) ({clock})", instant=True, table=True),
        target(f"max by (node, gpu) ({q.job_gpus(cfg, sel(gpu.SM_ACTIVE, n))})", instant=True, table=True),
        target(f"count by (node, gpu) ({reasons})", instant=True, table=True),
        target(f"max by (node, gpu) ({q.job_gpus(cfg, sel(gpu.TEMPERATURE, n))})", instant=True, table=True),
        target(f"max by (node, gpu) ({sel(analytics.STRAGGLER_FLAGGED, a, q.JOB)})", instant=True, table=True),
        # why a flagged one is slow: hardware (drain its node), transient, unknown
        target(f"max by (node, gpu, cause) ({sel(analytics.STRAGGLER_CAUSE, a, q.JOB)})", instant=True, table=True),
    ], "none", columns={"node": "node", "gpu": "gpu", "Value #A": "score", "Value #F": "flagged", "cause": "cause",
                        "Value #B": "SM clock / max", "Value #C": "SM active", "Value #D": "throttle reasons",
                        "Value #E": "temperature"}, hide=("Value #G",),
        sort_by="score", sort_desc=False, links=[data_link(cfg, "GPU node ${__data.fields.node}", "node", node="node")],
        overrides=[_unit_override(col, unit) for col, unit in (("score", "percentunit"), ("SM clock / max", "percentunit"),
                                                               ("SM active", "percentunit"), ("temperature", "celsius"))],
        w=12, h=10)
    activity = p.heatmap("Per-GPU activity (SM active)",
                         [target(q.job_gpus(cfg, sel(gpu.SM_ACTIVE, n)), "{{node}}/{{gpu}}")], "percentunit", w=12, h=10)
    return [ranking, activity]


def _views(cfg: Config) -> list:
    """The straggler's three views of pace, each ranking the job's ranks (instant, sorted: the slowest first):
    step times, collectives' arrival (NCCL Inspector: the rank that arrives last shows the shortest all-reduce),
    GPU activity. A rank slow in the first two and ordinary in the third waits for its host."""
    n, t = cfg.selectors.node, cfg.selectors.training
    per_rank = ("node", "gpu", "rank")
    wall = (f"sum by ({', '.join(per_rank)}) ({rate(cfg, pace.RANK_STEP_SECONDS_TOTAL, n, q.JOB)}) / "
            f"sum by ({', '.join(per_rank)}) ({rate(cfg, pace.RANK_STEPS, n, q.JOB)})")
    own = f"max by (node, gpu) ({sel(analytics.RANK_STEP_SECONDS, t, q.JOB)})"
    all_reduce = 'collective="AllReduce"'
    arrival = f"max by (node, gpu) ({sel(nccl_inspector.EXEC_TIME, n, q.JOB, all_reduce)})"
    busy = f"max by (node, gpu) ({q.job_gpus(cfg, sel(gpu.TENSOR_ACTIVE, n))})"
    return [
        p.bargauge("Step time by rank (own time; step feed's wall time)", [
            target(f"sort_desc({own})", "own {{node}}/{{gpu}}", instant=True),
            target(f"sort_desc({wall})", "wall rank {{rank}} {{node}}/{{gpu}}", instant=True)], "s",
            description="The rank's own compute and collective time per step, where the job exports it, tells the "
                        "ranks apart; the step feed's wall time between step ends is the job's one pace in a "
                        "synchronous job.", w=8, h=10),
        p.bargauge("Collective arrival by rank (NCCL Inspector all-reduce time, shortest first)", [
            target(f"sort({arrival})", "{{node}}/{{gpu}}", instant=True)], "s",
            description="In a synchronous collective the slowest rank arrives last and waits least inside the "
                        "kernel: the shortest time marks it, its peers' long times are their wait for it.", w=8, h=10),
        p.bargauge("GPU activity by rank (tensor active)", [
            target(f"sort_desc({busy})", "{{node}}/{{gpu}}", instant=True)], "percentunit", max=1,
            description="A rank slow for its own GPU computes longer than its peers; one slowed by its host (CPU, "
                        "data loader, NIC) looks like them.", w=8, h=10),
    ]


def _imbalance(cfg: Config) -> list:
    """Imbalance is no straggler (nothing became slower): its own panels, not the ranking's."""
    a = cfg.selectors.analytics
    waited = f"sum({rate(cfg, analytics.JOB_IMBALANCE_LOST_GPU_SECONDS, a, q.JOB)})"
    ratios = p.table("Imbalance: GPUs off the job's median pace since they started", [
        target(f"max by (node, gpu) ({sel(analytics.JOB_IMBALANCE_RATIO, a, q.JOB)})", instant=True, table=True),
        target(f"max by (node, gpu, cause) ({sel(analytics.JOB_IMBALANCE_CAUSE, a, q.JOB)})", instant=True, table=True),
    ], "none", columns={"node": "node", "gpu": "gpu", "Value #A": "ratio to median", "cause": "cause"},
        hide=("Value #B",), sort_by="ratio to median",
        links=[data_link(cfg, "GPU node ${__data.fields.node}", "node", node="node")], w=12, h=6)
    return [
        p.stat("Imbalance: GPU-hours spent waiting (range)", [target(f"{range_total(cfg, waited)} / 3600")],
               "suffix: GPU-h", thresholds=(("green", None), ("orange", 1)), w=6, h=6),
        p.timeseries("Imbalance: GPUs waiting for it", [target(waited, "GPUs")], "short", min=0, w=6, h=6),
        ratios,
    ]


def _pace(cfg: Config) -> list:
    a, t = cfg.selectors.analytics, cfg.selectors.training
    steps = sel(analytics.RANK_STEP_SECONDS, t, q.JOB)
    lost = f"sum by (cause) ({rate(cfg, analytics.JOB_LOST_GPU_SECONDS, a, q.JOB)})"
    losing = sel(r.JOB_LOST_GPU_SECONDS, q.JOB)   # over the window CheckpointStallExcessive uses
    stalls = p.state_timeline("Stalls by cause", [target(sel(analytics.JOB_STALLED, a, q.JOB), "{{cause}}")], "none",
                              states={"0": ("running", "green"), "1": ("stalled", "red")}, w=24, h=6,
                              overrides=[_stall_colour(cause, colour) for cause, colour in CAUSE_COLOURS.items()])
    # the ranks a hung job waits for, named from NCCL's RAS (empty while it runs): where to look first
    culprits = p.table("Hung ranks the job waits for (NCCL RAS)",
                       [target(f"max by (node, gpu, rank, cause) ({sel(analytics.JOB_HANG_CULPRIT, a, q.JOB)})",
                               instant=True, table=True)], "none",
                       columns={"node": "node", "gpu": "GPU", "rank": "rank", "cause": "cause"}, hide=("Value",),
                       w=24, h=5)
    return [
        p.timeseries("Step time: slowest and mean rank", [target(f"max({steps})", "slowest rank"),
                                                            target(f"avg({steps})", "mean rank")], "s", w=12),
        p.timeseries("Goodput", [target(sel(analytics.JOB_GOODPUT, a, q.JOB), "goodput")], "percentunit",
                     min=0, max=1, w=12),
        stalls,
        culprits,
        p.timeseries("GPUs lost by cause", [target(losing, "{{cause}}")], "short", stack=True, w=12),
        p.bargauge("Lost GPU-hours by cause (range)", [target(f"{range_total(cfg, lost)} / 3600", "{{cause}}")],
                   "suffix: GPU-h", w=12),
    ]


def _slowdown_and_ledger(cfg: Config) -> list:
    """Job-wide slowdowns (every rank slower than the job's own baseline, no stall: never paged) with
    their cause, and the goodput ledger: where the job's GPU-hours went."""
    a = cfg.selectors.analytics
    booked = f"sum by (kind, cause) ({rate(cfg, analytics.JOB_LEDGER_GPU_SECONDS, a, q.JOB)})"
    return [
        p.timeseries("Pace against its own baseline (job-wide slowdowns)",
                     [target(sel(analytics.JOB_PACE_RATIO, a, q.JOB), "pace ratio"),
                      target(f"max by (cause) ({sel(analytics.JOB_SLOWDOWN, a, q.JOB)})", "slowed: {{cause}}")],
                     "percentunit", min=0, w=12),
        p.bargauge("Where GPU-hours went (goodput ledger, range)",
                   [target(f"{range_total(cfg, booked)} / 3600", "{{kind}} {{cause}}")], "suffix: GPU-h", w=12),
    ]


def _fabric_and_storage(cfg: Config) -> list:
    n = cfg.selectors.node
    ib = q.by_device_rail(cfg, f"{rate(cfg, fabric.IB_TRANSMIT_BYTES, n)} + {rate(cfg, fabric.IB_RECEIVE_BYTES, n)}")
    paused = q.by_interface_rail(cfg, r.PFC_PAUSED)
    return [
        p.timeseries("Job's rails: throughput", [target(f"sum by (rail) ({q.job_nodes(cfg, ib)})", "rail {{rail}}")],
                     "Bps", w=8),
        p.timeseries("Job's rails: worst paused fraction",
                     [target(f"max by (rail) ({q.job_nodes(cfg, paused)})", "rail {{rail}}")], "percentunit",
                     min=0, max=1, w=8),
        p.timeseries("Job's storage", [
            target(f"sum by (mount) ({q.job_nodes(cfg, rate(cfg, storage.READ_BYTES, n))})", "read {{mount}}"),
            target(f"-sum by (mount) ({q.job_nodes(cfg, rate(cfg, storage.WRITE_BYTES, n))})", "write {{mount}}"),
        ], "Bps", w=8),
        # the job's own block I/O and I/O pressure, from its cgroup (the job-io collector; Slurm and Kubernetes)
        p.timeseries("Job's own block I/O (its cgroup)", [
            target(f"sum by (mount) ({rate(cfg, storage.JOB_IO_READ_BYTES, n, q.JOB)})", "read {{mount}}"),
            target(f"-sum by (mount) ({rate(cfg, storage.JOB_IO_WRITE_BYTES, n, q.JOB)})", "write {{mount}}"),
        ], "Bps", w=12),
        p.timeseries("Job's I/O pressure: share of time waiting on I/O (worst node)", [
            target(f"max by (kind) ({rate(cfg, storage.JOB_IO_PRESSURE, n, q.JOB)})", "{{kind}}"),
        ], "percentunit", min=0, max=1, w=12),
    ]


def _unit_override(column: str, unit: str) -> dict:
    return {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "unit", "value": unit}]}


def _stall_colour(cause: str, colour: str) -> dict:
    mapping = {"type": "value", "options": {"0": {"text": "running", "color": "green", "index": 0},
                                            "1": {"text": f"stalled: {cause}", "color": colour, "index": 1}}}
    return {"matcher": {"id": "byName", "options": cause}, "properties": [{"id": "mappings", "value": [mapping]}]}


def build(cfg: Config):
    job_id = query_variable("job_id", "Job", f"label_values({sel(gpu.JOB_INFO, cfg.selectors.node)}, job_id)")
    panels = [*_summary(cfg), *_stragglers(cfg), *_views(cfg), *_imbalance(cfg), *_pace(cfg), *_slowdown_and_ledger(cfg),
              *_fabric_and_storage(cfg)]
    return dashboard(cfg, NAME, "lockstep / Training job",
                     "One training job: straggler ranking with causes and evidence, activity, imbalance, pace, "
                     "stalls, job-wide slowdowns, lost GPU-hours and the goodput ledger, rails and storage.",
                     panels, [job_id])
