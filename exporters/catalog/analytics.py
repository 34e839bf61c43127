"""Metrics the analytics service computes from Prometheus data (and the step-time gauge a training
job may export itself)."""
from lockstep.exporters.catalog.enums import (
    IMBALANCE_CAUSES,
    LEDGER,
    LOSS_CAUSES,
    RANK_DEAD,
    RANK_HANGS,
    RANK_STOPPED,
    SLOWDOWN_CAUSES,
    STALL_CAUSES,
    STRAGGLER_CAUSES,
)
from lockstep.exporters.catalog.model import counter, gauge

STRAGGLER_SCORE = gauge(
    "lockstep_straggler_score",
    "Performance of each GPU (or node, with gpu=\"\") against its own usual pace among its job's peers: 1 keeps "
    "its pace, 0.7 has become a 0.7x straggler every rank waits for (lockstep_straggler_flagged says when it is "
    "flagged; a difference since the job started is imbalance, not a lower score).",
    ("job_id", "node", "gpu"))
JOB_STALLED = gauge("lockstep_job_stalled",
                    f"1 while the job is stalled, with the cause: {', '.join(STALL_CAUSES)}.", ("job_id", "cause"))
JOB_LOST_GPU_SECONDS = counter("lockstep_job_lost_gpu_seconds_total",
                               f"Allocated GPU-seconds lost, by cause: {', '.join(LOSS_CAUSES)}.",
                               ("job_id", "cause"), "seconds")
JOB_GOODPUT = gauge("lockstep_job_goodput_ratio", "Productive over allocated GPU-seconds for the job.", ("job_id",), "ratio")
RANK_STEP_SECONDS = gauge("lockstep_rank_step_seconds",
                          "Last step time of each rank, exported by the training job itself where it can.",
                          ("job_id", "rank", "node", "gpu"), "seconds")

METRICS = (STRAGGLER_SCORE, JOB_STALLED, JOB_LOST_GPU_SECONDS, JOB_GOODPUT, RANK_STEP_SECONDS)

# Added with the analytics service: what alerts and dashboards need beyond the core set,
# and the service's own health (Prometheus down or slow → results served stale).
STRAGGLER_FLAGGED = gauge("lockstep_straggler_flagged",
                          "1 while the GPU (or the node, gpu=\"\") is flagged as holding its job back: at least two "
                          "signals agree and the slowdown persisted.", ("job_id", "node", "gpu"))
JOB_ALLOCATED_GPU_SECONDS = counter("lockstep_job_allocated_gpu_seconds_total",
                                    "GPU-seconds allocated to the job that the analytics service has accounted.",
                                    ("job_id",), "seconds")
JOB_ACCOUNTED_UNTIL = gauge("lockstep_job_accounted_until_timestamp_seconds",
                            "Unix time of the last sample the job's loss counters include (a running job's newest "
                            "samples wait --book-after seconds): where a restarted or re-sharded analytics replica "
                            "resumes them.", ("job_id",), "seconds")
ANALYTICS_UP = gauge("lockstep_analytics_up", "1 if the last refresh from Prometheus succeeded, 0 if it failed.")
ANALYTICS_STALE = gauge("lockstep_analytics_results_stale",
                        "1 while the scores served are from an older refresh because the latest one failed.")
ANALYTICS_LAST_SUCCESS = gauge("lockstep_analytics_last_success_timestamp_seconds",
                               "Unix time of the last successful refresh.", (), "seconds")
ANALYTICS_REFRESH_FAILURES = counter("lockstep_analytics_refresh_failures_total",
                                     "Refreshes that failed (Prometheus unreachable, slow or answering an error).")
ANALYTICS_REFRESH_DURATION = gauge("lockstep_analytics_refresh_duration_seconds",
                                   "Wall time of the last refresh (queries and scoring).", (), "seconds")
ANALYTICS_JOBS = gauge("lockstep_analytics_jobs", "Jobs scored by this replica (its shard of the running jobs).")
ANALYTICS_REJECTED_JOB_IDS = gauge("lockstep_analytics_rejected_job_ids",
                                   "Job ids seen on lockstep_gpu_job_info that failed validation and were not queried.")

# Added with the imbalance finding: imbalance, a difference some ranks have had since the job started (a heavier
# pipeline stage, skewed data, hardware slow before the job), reported apart from stragglers.
JOB_IMBALANCE_LOST_GPU_SECONDS = counter(
    "lockstep_job_imbalance_lost_gpu_seconds_total",
    "GPU-seconds the job's ranks spent waiting for ranks that have run slower than the job median since they "
    "started (imbalance; counted while the job runs with no straggler or stall setting its pace).",
    ("job_id",), "seconds")
JOB_IMBALANCE_RATIO = gauge(
    "lockstep_job_imbalance_ratio",
    "Usual pace of each GPU that differs from its job's median since it started, as a ratio to the median "
    "(1.1: 10% slower; 0.85: faster); only GPUs at least 5% off it.", ("job_id", "node", "gpu"), "ratio")

METRICS += (JOB_IMBALANCE_LOST_GPU_SECONDS, JOB_IMBALANCE_RATIO)

METRICS += (STRAGGLER_FLAGGED, JOB_ALLOCATED_GPU_SECONDS, JOB_ACCOUNTED_UNTIL, ANALYTICS_UP, ANALYTICS_STALE,
            ANALYTICS_LAST_SUCCESS,
            ANALYTICS_REFRESH_FAILURES, ANALYTICS_REFRESH_DURATION, ANALYTICS_JOBS, ANALYTICS_REJECTED_JOB_IDS)

# Added with Kubernetes as a scheduler: which member a member_lost stall is waiting for.
JOB_MEMBER_MISSING = gauge(
    "lockstep_job_member_missing",
    "1 for each member of a job stalled with cause member_lost: a node whose GPUs of the job left the GPU-job "
    "mapping (its node agent stopped answering, or the pod holding them is gone) while the rest of the job waits. "
    "pod is the pod that held them (empty for Slurm).", ("job_id", "node", "pod"))

METRICS += (JOB_MEMBER_MISSING,)

# Added with incremental refresh: what each refresh asks of Prometheus.
ANALYTICS_REFRESH_SAMPLES = gauge(
    "lockstep_analytics_refresh_samples",
    "Samples the last refresh fetched from Prometheus: a job's whole window when it is new, its GPUs changed or "
    "after a gap, else only the rows new since the refresh before.")
ANALYTICS_FULL_FETCHES = gauge(
    "lockstep_analytics_refresh_full_fetches",
    "Jobs whose window the last refresh fetched whole (new jobs, GPUs changed, after a gap).")
METRICS += (ANALYTICS_REFRESH_SAMPLES, ANALYTICS_FULL_FETCHES)

# Added with causes on every finding: why a straggler or an imbalanced rank is slow, judged from its hardware.
STRAGGLER_CAUSE = gauge(
    "lockstep_straggler_cause",
    f"1 for the cause of each flagged GPU (or node, gpu=\"\"): {', '.join(STRAGGLER_CAUSES)}. hardware: its own "
    "hardware explains it (a thermal or hardware slowdown, the power brake, its clock below its peers', a narrow "
    "PCIe link, a hardware XID): drain the node; transient: its pace alone changed; unknown: mixed evidence; host: "
    "its step times or collectives show it slow while its GPU counters look like its peers' (its CPU, data loader "
    "or NIC). A GPU slow since it started is flagged only when its hardware explains it.",
    ("job_id", "node", "gpu", "cause"))
JOB_IMBALANCE_CAUSE = gauge(
    "lockstep_job_imbalance_cause",
    f"1 for the cause of each GPU of lockstep_job_imbalance_ratio: {', '.join(IMBALANCE_CAUSES)} (work: no hardware "
    "evidence, a heavier stage or skewed data; unknown: its hardware hints at more).", ("job_id", "node", "gpu", "cause"))
METRICS += (STRAGGLER_CAUSE, JOB_IMBALANCE_CAUSE)

# Added with job-wide slowdowns and the goodput ledger.
JOB_SLOWDOWN = gauge(
    "lockstep_job_slowdown",
    f"1 while every rank of the job runs slower than the job's own recent baseline (no stall), with the cause: "
    f"{', '.join(SLOWDOWN_CAUSES)} (power: a cluster-wide power or thermal cap). Never pages on its own.",
    ("job_id", "cause"))
JOB_PACE_RATIO = gauge(
    "lockstep_job_pace_ratio",
    "The job's work rate (its ranks' median compute activity times their SM clock against its maximum), over "
    "the last 30 s, against its own recent baseline: 1 as usual, 0.8 a fifth slower. Absent while it is stalled, "
    "held back by a straggler, idle, or before a baseline is known.", ("job_id",), "ratio")
_LEDGER_DOC = "; ".join(kind + (": " + ", ".join(causes) if any(causes) else "") for kind, causes in LEDGER.items())
JOB_LEDGER_GPU_SECONDS = counter(
    "lockstep_job_ledger_gpu_seconds_total",
    "The goodput ledger: every allocated GPU-second of the job (lockstep_job_allocated_gpu_seconds_total, which "
    f"the series of a job sum to) productive or lost to exactly one kind and cause ({_LEDGER_DOC}).",
    ("job_id", "kind", "cause"), "seconds")
METRICS += (JOB_SLOWDOWN, JOB_PACE_RATIO, JOB_LEDGER_GPU_SECONDS)

# Added with hang localisation: the ranks a hung job waits for, where NCCL's RAS names them.
JOB_HANG_CULPRIT = gauge(
    "lockstep_job_hang_culprit",
    f"1 for each rank a job stalled with cause {' or '.join(RANK_HANGS)} waits for: its node, GPU and rank "
    "(in the job's largest NCCL communicator; empty where unknown), from NCCL's RAS (the node agents' nccl-ras "
    f"collector): {RANK_STOPPED}, the rank is behind its communicator while the rest wait; {RANK_DEAD}, RAS gets "
    "no answer from its process.", ("job_id", "node", "gpu", "rank", "cause"))

METRICS += (JOB_HANG_CULPRIT,)

# Added with the cap on Prometheus answers: what the service refused to read.
ANALYTICS_ANSWERS_TOO_LARGE = counter(
    "lockstep_analytics_prometheus_answers_too_large_total",
    "Prometheus answers the service stopped reading past its --prometheus-max-answer-size (each fails the job "
    "that asked for it, or the whole refresh when it is the job list); the refresh error names the query.")
METRICS += (ANALYTICS_ANSWERS_TOO_LARGE,)

# Added with windows fetched across refreshes: how much of a job's window its scores rest on.
JOB_WINDOW_COVERAGE = gauge(
    "lockstep_analytics_job_window_coverage_ratio",
    "Share of the job's scored window (--window) fetched for every input of every GPU: 1 once it is whole; below 1 "
    "while a new job's window is being fetched, its scores resting on the newest rows only (none before those are "
    "in) and its loss not counted yet.", ("job_id",), "ratio")
METRICS += (JOB_WINDOW_COVERAGE,)

# Added with checkpoints as facts: each checkpoint of a job measured from its write burst and the activity it
# cost (lockstep.analytics.scoring.checkpoints), counted once it has ended.
JOB_CHECKPOINTS = counter(
    "lockstep_job_checkpoints_total",
    "Checkpoints the job has written: a write burst aligned with a drop of its activity, counted once it ended.",
    ("job_id",))
JOB_CHECKPOINT_SECONDS = counter(
    "lockstep_job_checkpoint_seconds_total",
    "Seconds the job's counted checkpoints took to write (each its bytes over its bandwidth).", ("job_id",), "seconds")
JOB_CHECKPOINT_BYTES = counter(
    "lockstep_job_checkpoint_written_bytes_total",
    "Bytes the job's counted checkpoints wrote, above its usual write rate.", ("job_id",), "bytes")
JOB_CHECKPOINT_LAST_DURATION = gauge(
    "lockstep_job_checkpoint_last_duration_seconds", "How long the job's last counted checkpoint took to write.",
    ("job_id",), "seconds")
JOB_CHECKPOINT_LAST_BYTES = gauge(
    "lockstep_job_checkpoint_last_bytes", "Bytes the job's last counted checkpoint wrote.", ("job_id",), "bytes")
JOB_CHECKPOINT_LAST_BANDWIDTH = gauge(
    "lockstep_job_checkpoint_last_bandwidth_bytes_per_second",
    "The write rate of the job's last counted checkpoint, over the samples its write filled.", ("job_id",),
    "bytes_per_second")
JOB_CHECKPOINT_LAST_START = gauge(
    "lockstep_job_checkpoint_last_start_timestamp_seconds", "When the job's last counted checkpoint started (Unix).",
    ("job_id",), "seconds")
JOB_CHECKPOINT_LAST_TARGET = gauge(
    "lockstep_job_checkpoint_last_target_info",
    "1 for the file system the job's last counted checkpoint wrote the most bytes to (its nodes' per-mount writes "
    "over its span).", ("job_id", "mount", "fstype"))
METRICS += (JOB_CHECKPOINTS, JOB_CHECKPOINT_SECONDS, JOB_CHECKPOINT_BYTES, JOB_CHECKPOINT_LAST_DURATION,
            JOB_CHECKPOINT_LAST_BYTES, JOB_CHECKPOINT_LAST_BANDWIDTH, JOB_CHECKPOINT_LAST_START, JOB_CHECKPOINT_LAST_TARGET)
