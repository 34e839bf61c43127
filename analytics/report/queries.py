"""The PromQL behind the monthly report, built from catalog names (never retyped).

Counters are fetched raw, one series each, and turned into increases in pandas
(``tables.counter_increase``): that is exact on the sample grid and survives counter resets, where
summing counters in PromQL first would not.

The same PromQL runs on Prometheus, Thanos, Mimir and VictoriaMetrics, so nothing leans on a default
that differs between them: a series sampled for its presence names its lookback window (Prometheus
looks back 5 minutes; VictoriaMetrics, on data without staleness markers such as backfilled or
migrated blocks, as far as one step), a subquery names its step (Prometheus defaults to its
evaluation interval, VictoriaMetrics to the outer query's step), and no range starts exactly on a
sample or point (``window``).
"""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.analytics.report.promrange import RangeQuery
from lockstep.exporters.catalog import analytics as A
from lockstep.exporters.catalog import fabric as F
from lockstep.exporters.catalog import gpu as G
from lockstep.exporters.catalog import power as P
from lockstep.exporters.catalog import storage as S
from lockstep.exporters.catalog.enums import CHECKPOINT, THROTTLE_REASONS


@dataclass(frozen=True, slots=True)
class Steps:
    """``coarse_s`` for month-long totals, ``fine_s`` to see individual checkpoint stalls."""

    coarse_s: float = 3600.0
    fine_s: float = 30.0

    @property
    def burst_margin_s(self) -> float:
        """A checkpoint's write burst is summed from this long before its stall to this long after:
        the stall is scored from other series than the writes, scraped at other moments."""
        return max(2 * self.fine_s, 60.0)


LOOKBACK_S = 300.0   # Prometheus' default lookback: a sample this old still counts as present
SAME_VALUE_REL = 1e-9   # a counter's drop this small, relative to its value, is rounding, not a restart


def window(seconds: float) -> str:
    """A range of ``seconds`` that holds the same samples or subquery points in Prometheus and in
    VictoriaMetrics: a millisecond short, since Prometheus 2 includes the point exactly at its start
    and VictoriaMetrics does not (a 1 h subquery at 30 s: 121 points against 120)."""
    return f"{round(seconds * 1000) - 1}ms"


def present(selector: str, step_s: float) -> str:
    """``selector``'s series that had a sample in the last step (at most LOOKBACK_S): each counts at
    the steps it covers and no longer, whatever the server's own lookback."""
    return f"last_over_time({selector}[{window(min(step_s, LOOKBACK_S))}])"


def increase_per_step(counter: str, step_s: float) -> str:
    """Each series' increase since the point a step before, a drop read as a restart from zero (as
    ``tables.point_increases`` reads raw samples), ready to sum. rate() would differ by backend near a
    series' first sample or a gap: Prometheus extrapolates to the window's edges at most half an
    interval past its samples and divides by the whole window, VictoriaMetrics divides by the time
    its samples cover and starts from the sample before the window. A drop within ``SAME_VALUE_REL`` of the
    value is rounding (VictoriaMetrics answers 12 significant digits), neither an increase nor a restart."""
    before = f"{counter} offset {int(step_s)}s"
    return f"(({counter} - {before}) >= 0 or {counter} < {before} * {1 - SAME_VALUE_REL!r})"


def monthly_queries(steps: Steps) -> tuple[RangeQuery, ...]:
    c, f = steps.coarse_s, steps.fine_s
    reasons = "|".join(THROTTLE_REASONS)
    return (
        RangeQuery("allocated", f"count by (cluster, job_id, user) ({present(G.JOB_INFO.name, c)})", c),
        RangeQuery("gpus", f"count by (cluster) ({present(G.INFO.name, c)})", c),   # the capacity the demand fills
        RangeQuery("lost", A.JOB_LOST_GPU_SECONDS.name, c),
        RangeQuery("imbalance", A.JOB_IMBALANCE_LOST_GPU_SECONDS.name, c),
        RangeQuery("ledger", A.JOB_LEDGER_GPU_SECONDS.name, c),
        RangeQuery("imbalance_ratio", f"max by (cluster, job_id) ({A.JOB_IMBALANCE_RATIO.name})", c),
        RangeQuery("imbalance_gpus", f"count by (cluster, job_id) ({A.JOB_IMBALANCE_RATIO.name} > 1)", c),
        RangeQuery("energy", P.PDU_ENERGY.name, c),
        # the peak of the rack's summed PDUs, seen at the fine resolution (a breaker trips on the sum)
        RangeQuery("rack_peak", f"max_over_time(sum by (cluster, rack) ({P.PDU_POWER.name})[{window(c)}:{int(f)}s])",
                   c, inner_s=f, window_s=c),
        RangeQuery("budget", f"max by (cluster, rack) ({P.RACK_BUDGET.name})", c),
        RangeQuery("xid", G.XID_ERRORS.name, c),
        RangeQuery("ecc", G.ECC_ERRORS.name, c),
        RangeQuery("flaps", F.IB_LINK_DOWNED.name, c),
        RangeQuery("throttle", f'avg_over_time(max by (cluster, node, gpu) '
                               f'({G.CLOCK_EVENT.name}{{reason=~"{reasons}"}})[{window(c)}:{int(f)}s])', c,
                   inner_s=f, window_s=c),
        # each checkpoint as the analytics service measured it (raw counters, increases in pandas)
        RangeQuery("ckpt_count", A.JOB_CHECKPOINTS.name, c),
        RangeQuery("ckpt_seconds", A.JOB_CHECKPOINT_SECONDS.name, c),
        RangeQuery("ckpt_bytes", A.JOB_CHECKPOINT_BYTES.name, c),
        RangeQuery("ckpt_stalled", f'max by (cluster, job_id) ({A.JOB_STALLED.name}{{cause="{CHECKPOINT}"}})', f),
        RangeQuery("write_rate", f"sum by (cluster) ({increase_per_step(S.WRITE_BYTES.name, f)}) / {int(f)}", f),
    )
