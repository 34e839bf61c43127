"""What the scorers read, as one PromQL query per input and job, reduced server-side where that shrinks the answer.

Each input answers on a window's grid with one series per key of ``by``: per GPU (``node, gpu``),
per HCA (``node, device``, summed over its ports) or per node, selected on the job's nodes (a
``node=~`` matcher: an index lookup, where a join with the job's ``lockstep_gpu_job_info`` costs
Prometheus a third more CPU per refresh; samples of a GPU while it does not hold the job are
dropped when placed, ``lockstep.analytics.frame.window``). Counters arrive as per-second rates
(``irate`` over two steps: the last two samples up to each step), so every row of an answer stands
on its own and a window can be fetched piece by piece. Reductions the scorers do not need per
series happen in the TSDB: node-wide counters are summed per node (a node has 128 PFC series), the
SM clock arrives as its ratio to the maximum, and clock-event reasons and link trouble arrive only
while present (a healthy GPU returns no sample for them). Where the store holds one series per key already
(``as_stored``: a GPU's gauges, its job_info, an HCA's port counters, recorded inputs), the query asks for them
as stored, without the aggregation per key: Prometheus spends several times more CPU on a ``max by`` that
collapses nothing than on the plain selector (the figures: docs/architecture.md), and the placing does what it would have done
with a second series of a key (the largest value, ports summed, presence as 1). ``lockstep.analytics.evaluation.emulate``
computes the same answers from a simulator frame; tests hold the two to each other on a real Prometheus.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from lockstep.analytics.prom import promql
from lockstep.exporters.catalog import analytics, fabric, gpu, nccl, nccl_inspector, storage
from lockstep.exporters.catalog.enums import IB_PORT_ACTIVE, THROTTLE_REASONS
from lockstep.exporters.catalog.recorded import ANALYTICS_INPUTS

GPU_KEY = ("node", "gpu")
HCA_KEY = ("node", "device")
NODE_KEY = ("node",)
LINK_COUNTERS = (fabric.IB_LINK_DOWNED.name, fabric.IB_LINK_ERROR_RECOVERY.name, fabric.IB_SYMBOL_ERRORS.name)


@dataclass(frozen=True)
class Input:
    """One query per job. ``kind``: ``gauge`` (the value, max per key), ``ratio`` (metrics[0] over
    metrics[1] where that is positive, max per key), ``rate`` (per-second rate of counters, summed per
    key) or ``present`` (1 per key while any of ``metrics`` is above 0 or, for ``link``, while a port
    is not ACTIVE or one of its link error counters rose; no sample otherwise); NCCL's RAS adds two
    joins: ``missing`` (1 per key while a rank RAS got no answer from is named by its own node: its
    address one of metrics[1]'s for that node) and ``largest`` (1 per key for the series of metrics[0]
    in the job's largest communicators, by metrics[1])."""

    name: str
    kind: str
    metrics: tuple[str, ...]
    by: tuple[str, ...]
    match: str = ""            # extra label matchers
    own_job_id: bool = False   # the metric carries job_id itself (else: selected on the job's nodes)
    fanout: int = 1            # series per GPU (per node for node-wide inputs): sizes the pieces of a window
    reads: int = 1             # raw series the store reads per series answered (PFC: 8 NICs x 8 priorities x 2): bounds a query
    recorded: bool = False     # read from its recorded series (``ANALYTICS_INPUTS``), one per key of ``by``
    # the store holds one series per key of ``by`` (the aggregation would collapse nothing): asked for as
    # stored, its aggregation left to the placing (``lockstep.analytics.frame.window``), as with recorded series
    as_stored: bool = False
    # a ``present`` input whose series are 0 nearly always (a degraded PCIe link): asked for as stored, the store
    # still keeps only its samples above 0, where the others would be sent and decoded to be dropped
    sparse: bool = False
    # carrying job_id and each rank's own ``node`` (the node agents serve them so; a job's own step times carry its
    # node too, and a series without one could not be placed on the window's (node, gpu) columns anyway): its query
    # names the nodes asked for beside the job, so a big job's answer is fetched in pieces by node (by job id alone,
    # a 65,536-rank job's RAS counters are one query over 400,000 series the store must load again for every piece
    # of time)
    node_served: bool = False
    # the nodes a query names are the ones it leaves out (``node!~``): a job's series on any other node (the
    # membership of a window fetched whole, beyond the nodes its GPUs were on at the window's two ends)
    except_nodes: bool = False

    def promql(self, job_id: str, step: float, nodes: Sequence[str] = ()) -> str:
        """The query for ``job_id`` on its ``nodes`` (the job's own series need none); ``step``: the
        query_range step (a rate spans two of them)."""
        by_node = not self.own_job_id or (self.node_served and nodes)
        where = ",".join(([f"job_id={promql.quote(promql.validate_job_id(job_id))}"] if self.own_job_id else []) +
                         ([f"node{'!~' if self.except_nodes else '=~'}{promql.quote(promql.alternatives(nodes))}"]
                          if by_node else []))
        return self.expression(where, step, nodes, aggregated=not (self.as_stored or self.recorded))

    @property
    def per_job(self) -> bool:
        """Its query selects by job id alone, every node of the job at once (``missing`` also names the
        nodes its ranks are joined on, so a query may ask for some of them)."""
        return self.own_job_id and self.kind != "missing" and not self.node_served

    def as_recorded(self) -> Input:
        """This input read from its recorded series (itself when it has none)."""
        return replace(self, recorded=True) if self.name in ANALYTICS_INPUTS else self

    def rule(self, step: float) -> str:
        """What its recording rule (``lockstep.alerts.recording``) must record: its query over every node,
        keeping ``job_id`` where the input selects by it (its series carry the job id themselves)."""
        by = self.by + ("job_id",) if self.own_job_id else self.by
        return replace(self, by=by, recorded=False).expression("", step)

    def expression(self, where: str, step: float, nodes: Sequence[str] = (), aggregated: bool = True) -> str:
        """The input's PromQL on the series ``where`` selects (every node's: ``""``, what its recording
        rule records; recorded, the one series per key the rule evaluated at each step); ``nodes``: those
        a ``missing`` input's addresses are joined on. ``aggregated=False``: without the outer aggregation
        per key of ``by`` (the series as the store holds them, each with its own labels)."""
        op = {"gauge": "max", "ratio": "max", "rate": "sum", "present": "group", "missing": "group",
              "largest": "group"}[self.kind]
        if self.recorded:   # its sample of this step only: a store may hold no staleness marker where it ends
            inner = f"last_over_time({ANALYTICS_INPUTS[self.name]}{{{where}}}[{round(step * 1000)}ms])"
            return f"{op} by ({', '.join(self.by)}) ({inner})" if aggregated else inner
        if self.kind == "ratio":
            num, den = (self._selector(m, where) for m in self.metrics)
            inner = f"{num} / ({den} > 0)"
        elif self.kind == "rate":
            inner = self._rate(self.metrics[0], where, step)
        elif self.kind == "present" and self.name == "link":
            state = f"{promql.selector(fabric.IB_STATE.name, where)} != {IB_PORT_ACTIVE}"
            inner = " or ".join([state] + [f"{self._rate(m, where, step)} > 0" for m in self.metrics])
        elif self.kind == "missing":
            on_nodes = f"node=~{promql.quote(promql.alternatives(nodes))}"
            inner = f"{self._selector(self.metrics[0], where)} and on (node, address) " \
                    f"{promql.selector(self.metrics[1], on_nodes)}"
        elif self.kind == "largest":
            size = promql.selector(self.metrics[1], where)
            inner = f"{self._selector(self.metrics[0], where)} and on (comm) " \
                    f"(max by (comm) ({size}) == scalar(max({size})))"
        elif not aggregated:   # the selector alone: a present input's samples above 0 are kept where they are placed
            return self._selector(self.metrics[0], where) + (" > 0" if self.sparse else "")
        else:
            inner = self._selector(self.metrics[0], where) + (" > 0" if self.kind == "present" else "")
        return f"{op} by ({', '.join(self.by)}) ({inner})" if aggregated else inner

    def _selector(self, metric: str, where: str) -> str:
        return promql.selector(metric, ",".join(m for m in (self.match, where) if m))

    def _rate(self, metric: str, where: str, step: float) -> str:
        return f"irate({self._selector(metric, where)}[{rate_range(step)}])"


def rate_range(step: float) -> str:
    """Two steps, in milliseconds: the last two samples at or before each step (a missed scrape
    still leaves one rate, across the gap)."""
    return f"{round(2 * step * 1000)}ms"


# the pod holding each GPU for the job, where Kubernetes runs it (none under Slurm)
MEMBER = Input("member", "present", (gpu.JOB_INFO.name,), GPU_KEY + ("pod",), own_job_id=True, as_stored=True)
# The same, asked for by the job's nodes (a window fetched whole, whose nodes its two ends name: each piece
# every row, lookback read once) and on every node but those (``except_nodes``)
MEMBER_ON_NODES = replace(MEMBER, node_served=True)
MEMBER_ELSEWHERE = replace(MEMBER, node_served=True, except_nodes=True)
INPUTS = (
    MEMBER,
    Input("sm", "gauge", (gpu.SM_ACTIVE.name,), GPU_KEY, as_stored=True),
    Input("tensor", "gauge", (gpu.TENSOR_ACTIVE.name,), GPU_KEY, as_stored=True),
    # per-rank step time (compute + all-reduce, no waiting) where the training job exports it
    Input("step", "gauge", (analytics.RANK_STEP_SECONDS.name,), GPU_KEY, own_job_id=True, as_stored=True,
          node_served=True),
    # NCCL Inspector (the nccl-inspector collector): the longest mean execution time among the rank's all-reduce
    # buckets. Inverted: the rank that arrives last waits least inside the kernel, so its time is the shortest
    # (lockstep.analytics.scoring.straggler reads its inverse as the rank's lateness).
    Input("collective", "gauge", (nccl_inspector.EXEC_TIME.name,), GPU_KEY, match='collective=~"AllReduce"',
          own_job_id=True, node_served=True),
    Input("clock", "ratio", (gpu.SM_CLOCK.name, gpu.SM_CLOCK_MAX.name), GPU_KEY, reads=2, as_stored=True),
    Input("reasons", "present", (gpu.CLOCK_EVENT.name,), GPU_KEY + ("reason",),
          match=f'reason=~"{"|".join(THROTTLE_REASONS)}"', fanout=len(THROTTLE_REASONS), as_stored=True, sparse=True),
    # a rank's own hardware, judged when it runs slower than its peers (lockstep.analytics.scoring.cause)
    Input("temp", "gauge", (gpu.TEMPERATURE.name,), GPU_KEY, as_stored=True),
    Input("pcie", "present", (gpu.PCIE_LINK_DEGRADED.name,), GPU_KEY, as_stored=True, sparse=True),
    Input("xid", "present", (gpu.XID_ERRORS.name,), GPU_KEY, match='category=~"hardware"'),
    Input("tx", "rate", (fabric.IB_TRANSMIT_BYTES.name,), HCA_KEY, as_stored=True),
    Input("xmit_wait", "rate", (fabric.IB_TRANSMIT_WAIT.name,), HCA_KEY, as_stored=True),
    Input("link", "present", LINK_COUNTERS, HCA_KEY, reads=len(LINK_COUNTERS) + 1),
    Input("read", "rate", (storage.READ_BYTES.name,), NODE_KEY, reads=4),
    # the share of time every task of the job's cgroup on a node waited on I/O (PSI "full"): its input stalls
    Input("io_wait", "rate", (storage.JOB_IO_PRESSURE.name,), NODE_KEY, match='kind=~"full"', own_job_id=True,
          as_stored=True, node_served=True),
    Input("write", "rate", (storage.WRITE_BYTES.name,), NODE_KEY, reads=4),
    Input("pause", "rate", (fabric.PFC_PAUSE_DURATION.name,), NODE_KEY, reads=128),
    Input("cnp", "rate", (fabric.ROCE_CNP_HANDLED.name,), NODE_KEY, reads=8),
)
# NCCL's RAS, where the node agents run the nccl-ras collector (a job without it answers nothing): each rank's
# collectives per second, how far it is behind its communicator within one RAS answer, the age of the answer
# each node serves, the ranks RAS got no answer from (named by their own node: unresponsive or dead), and
# each GPU's rank in the job's largest communicator (the world rank of a data-parallel job).
RAS_INPUTS = (
    Input("collectives", "rate", (nccl.RANK_COLLECTIVES.name,), GPU_KEY, own_job_id=True, node_served=True),
    Input("behind", "gauge", (nccl.RANK_BEHIND.name,), GPU_KEY, own_job_id=True, node_served=True),
    Input("ras_age", "gauge", (nccl.RAS_ANSWER_AGE.name,), NODE_KEY),
    Input("missing", "missing", (nccl.MISSING_RANK_INFO.name, nccl.RAS_NODE_ADDRESS.name), GPU_KEY + ("reason",),
          match='reason=~"unresponsive|dead"', own_job_id=True, fanout=2),
    Input("rank", "largest", (nccl.RANK_BEHIND.name, nccl.COMMUNICATOR_RANKS.name), GPU_KEY + ("rank",),
          own_job_id=True, as_stored=True, node_served=True),
)
INPUTS += RAS_INPUTS
# Where a job writes, per mount: asked only over each checkpoint's span, never per refresh (the checkpoint's
# target file system: lockstep.analytics.scoring.checkpoints.target).
WRITE_BY_MOUNT = Input("write_target", "rate", (storage.WRITE_BYTES.name,), NODE_KEY + ("mount", "fstype"))
# Every metric the inputs read (what a simulator frame needs to hold for the scorers).
INPUT_METRICS = tuple(dict.fromkeys([m for i in INPUTS for m in i.metrics] + [fabric.IB_STATE.name]))
# The inputs the TSDB may record for the service, one series per rank or node (``ANALYTICS_INPUTS``).
RECORDABLE = tuple(i for i in INPUTS if i.name in ANALYTICS_INPUTS)
