"""The analytics service's ``/metrics``: one refresh's results and the service's health as catalog samples."""
from __future__ import annotations

from lockstep.analytics.scoring.loss import LOSS_CAUSES
from lockstep.analytics.scoring.stall import CAUSES
from lockstep.analytics.service import peers
from lockstep.analytics.service.refresh import RefreshState
from lockstep.analytics.service.state import Health, LossCounters
from lockstep.analytics.service.views import JobView
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.catalog.enums import MEMBER_LOST, RANK_HANGS
from lockstep.exporters.toolkit.exposition import Encoder, render_families
from lockstep.exporters.toolkit.sample import Sample


def job_samples(view: JobView, loss: LossCounters) -> list[Sample]:
    job = view.job_id
    out = []
    for row in view.gpus + view.nodes:
        labels = (job, row.node, row.gpu or "")
        out.append(Sample(cat.STRAGGLER_SCORE, labels, row.score))
        out.append(Sample(cat.STRAGGLER_FLAGGED, labels, float(row.flagged)))
        if row.flagged and row.cause:
            out.append(Sample(cat.STRAGGLER_CAUSE, (*labels, row.cause), 1.0))
    for cause in CAUSES:
        out.append(Sample(cat.JOB_STALLED, (job, cause), float(view.stall.cause == cause)))
    if view.stall.cause == MEMBER_LOST:   # which member the job waits for: the page names it
        for member in view.stall.evidence.get("missing", ()):
            out.append(Sample(cat.JOB_MEMBER_MISSING, (job, member["node"], member["pod"]), 1.0))
    if view.stall.cause in RANK_HANGS:    # the ranks the hung job waits for: the page names them
        for culprit in view.stall.evidence.get("culprits", ()):
            out.append(Sample(cat.JOB_HANG_CULPRIT, (job, culprit["node"], culprit["gpu"], culprit["rank"],
                                                     view.stall.cause), 1.0))
    for cause in LOSS_CAUSES:
        out.append(Sample(cat.JOB_LOST_GPU_SECONDS, (job, cause), round(loss.lost[cause], 3)))
    out.append(Sample(cat.JOB_ALLOCATED_GPU_SECONDS, (job,), loss.allocated))
    # unrounded: the ledger's series sum to the allocation, and a replica resuming them keeps that
    for kind, by_cause in loss.ledger.items():
        for cause, value in by_cause.items():
            out.append(Sample(cat.JOB_LEDGER_GPU_SECONDS, (job, kind, cause), value))
    if view.slowdown.slowed:
        out.append(Sample(cat.JOB_SLOWDOWN, (job, view.slowdown.cause), 1.0))
    if view.slowdown.pace_ratio is not None:
        out.append(Sample(cat.JOB_PACE_RATIO, (job,), view.slowdown.pace_ratio))
    out.append(Sample(cat.JOB_IMBALANCE_LOST_GPU_SECONDS, (job,), round(loss.imbalance, 3)))
    for rank in view.imbalance.ranks:
        out.append(Sample(cat.JOB_IMBALANCE_RATIO, (job, rank.node, rank.gpu), rank.ratio))
        out.append(Sample(cat.JOB_IMBALANCE_CAUSE, (job, rank.node, rank.gpu, rank.cause), 1.0))
    out += checkpoint_samples(job, loss)
    if loss.accounted_until > float("-inf"):
        out.append(Sample(cat.JOB_ACCOUNTED_UNTIL, (job,), loss.accounted_until))
    if (goodput := loss.goodput()) is not None:
        out.append(Sample(cat.JOB_GOODPUT, (job,), round(goodput, 6)))
    return out


def checkpoint_samples(job: str, loss: LossCounters) -> list[Sample]:
    """The job's counted checkpoints, and its last one's figures once there is one."""
    out = [Sample(cat.JOB_CHECKPOINTS, (job,), float(loss.checkpoints)),
           Sample(cat.JOB_CHECKPOINT_SECONDS, (job,), round(loss.checkpoint_seconds, 3)),
           Sample(cat.JOB_CHECKPOINT_BYTES, (job,), float(loss.checkpoint_bytes))]
    if (last := loss.last_checkpoint) is not None:
        out += [Sample(cat.JOB_CHECKPOINT_LAST_DURATION, (job,), last["duration_s"]),
                Sample(cat.JOB_CHECKPOINT_LAST_BYTES, (job,), float(last["bytes"])),
                Sample(cat.JOB_CHECKPOINT_LAST_BANDWIDTH, (job,), float(last["bandwidth_bytes_per_second"])),
                Sample(cat.JOB_CHECKPOINT_LAST_START, (job,), last["start_timestamp"])]
        if "mount" in last:
            out.append(Sample(cat.JOB_CHECKPOINT_LAST_TARGET, (job, last["mount"], last["fstype"]), 1.0))
    return out


def health_samples(h: Health, jobs: int) -> list[Sample]:
    out = [Sample(cat.ANALYTICS_UP, (), float(h.up)), Sample(cat.ANALYTICS_STALE, (), float(h.stale)),
           Sample(cat.ANALYTICS_REFRESH_FAILURES, (), float(h.failures)),
           Sample(cat.ANALYTICS_REFRESH_DURATION, (), round(h.duration_s, 6)),
           Sample(cat.ANALYTICS_JOBS, (), float(jobs)),
           Sample(cat.ANALYTICS_REJECTED_JOB_IDS, (), float(len(h.rejected_job_ids))),
           Sample(cat.ANALYTICS_REFRESH_SAMPLES, (), float(h.fetched_samples)),
           Sample(cat.ANALYTICS_FULL_FETCHES, (), float(h.full_fetches)),
           Sample(cat.ANALYTICS_ANSWERS_TOO_LARGE, (), float(h.answers_too_large))]
    if h.last_success is not None:
        out.append(Sample(cat.ANALYTICS_LAST_SUCCESS, (), h.last_success))
    return out


def render_metrics(state: RefreshState, encoder: Encoder, openmetrics: bool) -> str:
    families: dict = {}
    results = state.results            # one refresh's snapshot (this runs in a worker thread)
    encoder.add(families, health_samples(state.health, len(results.jobs)))
    for job_id, view in results.jobs.items():
        encoder.add(families, job_samples(view, results.losses[job_id]))
    encoder.add(families, [Sample(cat.JOB_WINDOW_COVERAGE, (job_id,), round(ratio, 4))
                           for job_id, ratio in results.coverage.items()])
    encoder.add(families, peers.samples(state.peers))
    return render_families(families, openmetrics)
