"""The PromQL behind the monthly report, built from catalog names (never retyped).

Counters are fetched raw, one series each, and turned into increases in pandas
(``tables.counter_increase``): that is exact on the sample grid and survives counter resets, where
summing counters in PromQL first would not.
"""
from __future__ import annotations

from dataclasses import dataclass

from analytics.report.promrange import RangeQuery
from exporters.catalog import analytics as A, fabric as F, gpu as G, power as P, storage as S
from exporters.catalog.enums import CHECKPOINT, THROTTLE_REASONS


@dataclass(frozen=True, slots=True)
class Steps:
    """``coarse_s`` for month-long totals, ``fine_s`` to see individual checkpoint stalls."""

    coarse_s: float = 3600.0
    fine_s: float = 30.0

    @property
    def rate_window_s(self) -> float:
        return max(2 * self.fine_s, 60.0)  # rate() needs two samples in its window


def monthly_queries(steps: Steps) -> tuple[RangeQuery, ...]:
    c, f = steps.coarse_s, steps.fine_s
    window = f"{int(steps.rate_window_s)}s"
    reasons = "|".join(THROTTLE_REASONS)
    return (
        RangeQuery("allocated", f"count by (cluster, job_id, user) ({G.JOB_INFO.name})", c),
        RangeQuery("lost", A.JOB_LOST_GPU_SECONDS.name, c),
        RangeQuery("imbalance", A.JOB_IMBALANCE_LOST_GPU_SECONDS.name, c),
        RangeQuery("imbalance_ratio", f"max by (cluster, job_id) ({A.JOB_IMBALANCE_RATIO.name})", c),
        RangeQuery("imbalance_gpus", f"count by (cluster, job_id) ({A.JOB_IMBALANCE_RATIO.name} > 1)", c),
        RangeQuery("energy", P.PDU_ENERGY.name, c),
        # the peak of the rack's summed PDUs, seen at the fine resolution (a breaker trips on the sum)
        RangeQuery("rack_peak", f"max_over_time(sum by (cluster, rack) ({P.PDU_POWER.name})[{int(c)}s:{int(f)}s])", c),
        RangeQuery("budget", f"max by (cluster, rack) ({P.RACK_BUDGET.name})", c),
        RangeQuery("xid", G.XID_ERRORS.name, c),
        RangeQuery("ecc", G.ECC_ERRORS.name, c),
        RangeQuery("flaps", F.IB_LINK_DOWNED.name, c),
        RangeQuery("throttle", f'avg_over_time(max by (cluster, node, gpu) '
                               f'({G.CLOCK_EVENT.name}{{reason=~"{reasons}"}})[{int(c)}s:])', c),
        RangeQuery("ckpt_stalled", f'max by (cluster, job_id) ({A.JOB_STALLED.name}{{cause="{CHECKPOINT}"}})', f),
        RangeQuery("write_rate", f"sum by (cluster) (rate({S.WRITE_BYTES.name}[{window}]))", f),
    )
