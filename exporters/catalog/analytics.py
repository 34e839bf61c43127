"""Metrics the analytics service computes from Prometheus data (and the step-time gauge a training
job may export itself)."""
from exporters.catalog.model import counter, gauge

STRAGGLER_SCORE = gauge(
    "lockstep_straggler_score",
    "Straggler score per GPU (or per node with gpu=\"\") within its job: 0 normal, towards 1 holding the job back.",
    ("job_id", "node", "gpu"))
JOB_STALLED = gauge("lockstep_job_stalled",
                    "1 while the job is stalled, with the cause: checkpoint, network, storage, straggler, hang.",
                    ("job_id", "cause"))
JOB_LOST_GPU_SECONDS = counter("lockstep_job_lost_gpu_seconds_total",
                               "Allocated GPU-seconds lost, by cause: checkpoint, straggler, network, storage, hang, throttle.",
                               ("job_id", "cause"), "seconds")
JOB_GOODPUT = gauge("lockstep_job_goodput_ratio", "Productive over allocated GPU-seconds for the job.", ("job_id",), "ratio")
RANK_STEP_SECONDS = gauge("lockstep_rank_step_seconds",
                          "Last step time of each rank, exported by the training job itself where it can.",
                          ("job_id", "rank", "node", "gpu"), "seconds")

METRICS = (STRAGGLER_SCORE, JOB_STALLED, JOB_LOST_GPU_SECONDS, JOB_GOODPUT, RANK_STEP_SECONDS)
