"""Cluster validation results (``lockstep validate``), served by the node agent's ``validation`` collector.

One *run* is identified by ``kind`` (the tool), ``test`` (what it ran: ``all_reduce_perf``,
``ib_write_bw/mlx5_0``, ``dcgm-diag-r3``, ...) and ``scale`` (how many nodes it covered). Only each
run's latest result is served; Prometheus keeps the history. Every label is bounded: tests and scales are
what a site chooses to run, subjects are a node's GPUs, HCAs or fio jobs, figures are fixed per tool.
"""
from lockstep.exporters.catalog.model import gauge

RUN = ("kind", "test", "scale")
FIGURE = RUN + ("subject", "figure")

STATUS = gauge(
    "lockstep_validation_status",
    "Always 1, for the status of the latest run only: pass, warn, fail (the tool's judgement), timeout "
    "(killed at its limit) or error (no parsable output).", RUN + ("status",))
LAST_RUN = gauge(
    "lockstep_validation_last_run_timestamp_seconds", "When the latest run started (Unix time).", RUN, "seconds")
DURATION = gauge(
    "lockstep_validation_duration_seconds", "How long the latest run took, until it ended or was killed.",
    RUN, "seconds")
TOOL_INFO = gauge(
    "lockstep_validation_tool_info", "Always 1; the version the tool printed in its latest run (absent when it "
    "printed none).", RUN + ("version",))
CHECK_STATUS = gauge(
    "lockstep_validation_check_status",
    "Always 1, for each check of the latest run that did not pass: warn, fail or skip (passed checks are not "
    "emitted; the run's status says they passed). check: the DCGM test, 'burn' (gpu-burn), 'job' (fio), "
    "'data' (nccl-tests' out-of-bounds check); subject: the GPU (gpu3), fio job or empty.",
    RUN + ("check", "subject", "status"))
BANDWIDTH = gauge(
    "lockstep_validation_bandwidth_bytes_per_second",
    "Bandwidth measured by the latest run: nccl-tests avg_busbw (the average bus bandwidth it prints) and "
    "peak_busbw (largest over message sizes); perftest bw_average/bw_peak at the largest message "
    "size; fio read_bw/write_bw per job.", FIGURE, "bytes_per_second")
BANDWIDTH_BASELINE = gauge(
    "lockstep_validation_bandwidth_baseline_bytes_per_second",
    "The same figure's baseline: source=history is the median of this node's last good runs of the test "
    "(the latest run excluded).", FIGURE + ("source",), "bytes_per_second")
OPERATIONS = gauge(
    "lockstep_validation_operations_per_second",
    "Rates measured by the latest run: perftest msg_rate (messages), fio read_iops/write_iops, gpu-burn "
    "flop (floating-point operations) per GPU.", FIGURE)
OPERATIONS_BASELINE = gauge(
    "lockstep_validation_operations_baseline_per_second",
    "The same figure's baseline (see lockstep_validation_bandwidth_baseline_bytes_per_second).",
    FIGURE + ("source",))
LATENCY = gauge(
    "lockstep_validation_latency_seconds",
    "Latencies measured by the latest run: perftest latency tests t_typical/t_avg/t_p99/t_p99_9 at the "
    "largest message size; fio read_lat_p50/p99/p99_9 (and write_) per job.", FIGURE, "seconds")
ERRORS = gauge(
    "lockstep_validation_errors",
    "Errors the latest run counted: nccl-tests out_of_bounds (wrong values), gpu-burn compute errors per GPU.",
    FIGURE)

# Figure unit (validation.model.Figure.unit) -> (metric, baseline metric or None).
FIGURE_METRICS = {
    "bytes_per_second": (BANDWIDTH, BANDWIDTH_BASELINE),
    "per_second": (OPERATIONS, OPERATIONS_BASELINE),
    "seconds": (LATENCY, None),
    "errors": (ERRORS, None),
}

METRICS = (STATUS, LAST_RUN, DURATION, TOOL_INFO, CHECK_STATUS, BANDWIDTH, BANDWIDTH_BASELINE, OPERATIONS,
           OPERATIONS_BASELINE, LATENCY, ERRORS)
