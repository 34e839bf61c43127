"""member_lost: a job's member leaves the GPU-job mapping while the rest wait in the collective. Built
from long frames of the FORMATS.md shape (the mapping series and GPU activity), answers known by
construction: which member is gone, when, and what is not a lost member."""
from __future__ import annotations

import pandas as pd

from lockstep.analytics.evaluation.simframe import build_features, score_frame
from lockstep.analytics.scoring import stall
from lockstep.analytics.service.metrics import job_samples
from lockstep.analytics.service.state import LossCounters
from lockstep.analytics.service.views import job_view
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.catalog import gpu

PERIOD, T, LOST_AT = 5.0, 60, 30
JOB = "ml-team/llama-pretrain"


def frame(mapped, tensor) -> pd.DataFrame:
    """4 nodes × 2 GPUs of JOB, one pod per node. ``mapped(t, node, g)``: the GPU is in the mapping at
    sample t; ``tensor(t, node, g)``: its tensor activity."""
    rows = []
    for t in range(T):
        for n in range(4):
            for g in range(2):
                node, pod = f"node{n:02d}", f"llama-pretrain-node-0-{n}"
                labels = {"node": node, "gpu": str(g), "timestamp": t * PERIOD}
                if mapped(t, n, g):
                    rows.append({**labels, "metric": gpu.JOB_INFO.name, "job_id": JOB, "pod": pod, "value": 1.0})
                for metric in (gpu.SM_ACTIVE.name, gpu.TENSOR_ACTIVE.name):
                    rows.append({**labels, "metric": metric, "job_id": "", "pod": "", "value": tensor(t, n, g)})
    return pd.DataFrame(rows)


def waiting(t, n, g):
    """Everyone computes; from LOST_AT the job waits in its collective (no tensor work)."""
    return 0.6 if t < LOST_AT else 0.02


def causes_of(f: pd.DataFrame):
    result = score_frame(f)[JOB]
    return result, list(result.causes)


def test_a_member_gone_while_the_rest_wait_is_member_lost_with_the_member_as_evidence():
    """Lost from its second sample missing (the first could be one missed scrape: the wait is a hang until then)."""
    result, causes = causes_of(frame(lambda t, n, g: t < LOST_AT or n != 2, waiting))
    assert set(causes[:LOST_AT]) == {""} and causes[LOST_AT] == "hang"
    assert set(causes[LOST_AT + 1:]) == {"member_lost"}
    assert result.evidence[-1]["missing"] == [{"node": "node02", "pod": "llama-pretrain-node-0-2", "gpus": ["0", "1"]}]
    assert result.loss["lost_gpu_seconds"]["member_lost"] > 0.9 * 8 * PERIOD * (T - LOST_AT)
    samples = job_samples(job_view(result, LossCounters()), LossCounters())
    assert [s.labels for s in samples if s.metric is cat.JOB_MEMBER_MISSING] == \
        [(JOB, "node02", "llama-pretrain-node-0-2")]


def test_one_missed_scrape_of_a_node_during_a_hang_is_no_lost_member():
    """A node agent's scrape fails once (its series are gone for that sample, mapping and activity alike)
    while the job waits: still a hang; a second miss in a row makes it a lost member."""
    def once(t, n, g):
        return n != 2 or t != LOST_AT + 5

    f = frame(once, waiting)
    _, causes = causes_of(f[~((f["node"] == "node02") & (f["timestamp"] == (LOST_AT + 5) * PERIOD))])
    assert "member_lost" not in causes and set(causes[LOST_AT + 1:]) == {"hang"}
    def twice(t, n, g):
        return n != 2 or t not in (LOST_AT + 5, LOST_AT + 6)

    _, causes = causes_of(frame(twice, waiting))
    assert causes[LOST_AT + 5] == "hang" and causes[LOST_AT + 6] == "member_lost"


def test_a_job_whose_members_all_finish_is_not_lost_nor_stalled():
    _, causes = causes_of(frame(lambda t, n, g: t < LOST_AT, waiting))
    assert set(causes) == {""}


def test_a_member_gone_while_the_rest_keep_computing_is_no_stall():
    """An elastic job that shrank: the remaining ranks go on."""
    _, causes = causes_of(frame(lambda t, n, g: t < LOST_AT or n != 2, lambda t, n, g: 0.6))
    assert set(causes) == {""}


def test_one_gpu_leaving_is_a_gpu_fault_not_a_lost_member():
    """A GPU fallen off the bus leaves the mapping alone; its node's other GPU is still there."""
    _, causes = causes_of(frame(lambda t, n, g: t < LOST_AT or (n, g) != (2, 1), waiting))
    assert "member_lost" not in causes and set(causes[LOST_AT + 1:]) == {"hang"}


def test_without_pods_a_node_is_the_member():
    """Slurm: no pod label; the node agent stopped answering, so its GPUs' activity is gone too."""
    f = frame(lambda t, n, g: t < LOST_AT or n != 3, waiting).assign(pod="")
    f = f[~((f["node"] == "node03") & (f["timestamp"] >= LOST_AT * PERIOD))]
    js = stall.job_signals(build_features(f), JOB)
    assert stall.missing_members(js, T - 1) == [{"node": "node03", "pod": "", "gpus": ["0", "1"]}]
    assert stall.missing_members(js, LOST_AT - 1) == []
