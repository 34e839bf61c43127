"""Storage (variables ``node`` and ``system``, multi-valued): read/write throughput per mount, metadata operations,
checkpoint bursts and how long checkpoints stall jobs, NFS round-trip time and retransmissions,
local NVMe throughput and busy time; per-job block I/O and I/O stall time (cgroup v2), NVMe wear and spare; and the
cluster-wide storage systems the storage exporter polls (MinIO, Ceph RGW, VAST, WEKA: each target's buckets, file
systems or cluster), read and write throughput, operations, mean latency per operation, capacity used, and whether
each system answers."""
from __future__ import annotations

from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards.config import Config, range_total, rate, sel
from lockstep.dashboards.grafana import dashboard, query_variable, target
from lockstep.exporters.catalog import analytics
from lockstep.exporters.catalog import storage as s
from lockstep.exporters.catalog import storagesys as ss
from lockstep.exporters.catalog.enums import CHECKPOINT

NAME = "storage"
CHECKPOINTS = f'cause="{CHECKPOINT}"'
SOME_STALLED = 'kind="some"'
SYSTEM = 'target=~"$system"'
PER_SYSTEM = "target, scope, name"
SYSTEM_LEGEND = "{{target}} {{scope}} {{name}}"
HOSTS, NOT_HOSTS = f'scope="{ss.HOST_SCOPE}"', f'scope!="{ss.HOST_SCOPE}"'


def _throughput(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    return [
        p.timeseries("Read throughput per mount", [
            target(f"sum by (mount, fstype) ({rate(cfg, s.READ_BYTES, *n)})", "{{mount}} ({{fstype}})")], "Bps", w=12),
        p.timeseries("Write throughput per mount (checkpoint bursts)", [
            target(f"sum by (mount, fstype) ({rate(cfg, s.WRITE_BYTES, *n)})", "{{mount}} ({{fstype}})")], "Bps", w=12),
        p.timeseries("Metadata operations", [
            target(f"sum by (mount, op) ({rate(cfg, s.METADATA_OPS, *n)})", "{{mount}} {{op}}")], "ops", w=12),
    ]


def _checkpoints(cfg: Config) -> list:
    a = cfg.selectors.analytics
    stalled = sel(analytics.JOB_STALLED, a, CHECKPOINTS)
    return [
        p.state_timeline("Checkpoint in progress (job stalled on it)", [target(stalled, "job {{job_id}}")], "none",
                         states={"0": ("training", "green"), "1": ("checkpoint", "blue")}, w=12),
        p.stat("Checkpoint stall time (range)", [target(range_total(cfg, f"max({stalled})"))], "s", w=6, h=8),
        p.stat("GPU-hours lost to checkpoints (range)",
               [target(f"{range_total(cfg, f'sum({rate(cfg, analytics.JOB_LOST_GPU_SECONDS, a, CHECKPOINTS)})')} / 3600")],
               "suffix: GPU-h", w=6, h=8),
    ]


def _nfs_and_disks(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    rtt = f"sum by (mount, op) ({rate(cfg, s.NFS_RPC_RTT, *n)}) / sum by (mount, op) ({rate(cfg, s.NFS_RPC_OPS, *n)})"
    return [
        p.timeseries("NFS RPC round-trip time (mean per op)", [target(rtt, "{{mount}} {{op}}")], "s", w=8),
        p.timeseries("NFS retransmissions and major timeouts", [
            target(f"sum by (mount) ({rate(cfg, s.NFS_RPC_RETRANSMISSIONS, *n)})", "retrans {{mount}}"),
            target(f"sum by (mount) ({rate(cfg, s.NFS_RPC_MAJOR_TIMEOUTS, *n)})", "timeouts {{mount}}"),
        ], "cps", w=8),
        p.timeseries("Local disks busy", [target(rate(cfg, s.DISK_IO_TIME, *n), "{{node}} {{device}}")],
                     "percentunit", min=0, max=1, w=8),
        p.timeseries("Local disk throughput", [
            target(f"sum by (node, device) ({rate(cfg, s.DISK_READ_BYTES, *n)})", "read {{node}} {{device}}"),
            target(f"-sum by (node, device) ({rate(cfg, s.DISK_WRITE_BYTES, *n)})", "write {{node}} {{device}}"),
        ], "Bps", w=12),
    ]


def _jobs_and_nvme(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    return [
        p.timeseries("Block I/O per job (cgroup v2)", [
            target(f"sum by (job_id, mount) ({rate(cfg, s.JOB_IO_READ_BYTES, *n)})", "read {{job_id}} {{mount}}"),
            target(f"-sum by (job_id, mount) ({rate(cfg, s.JOB_IO_WRITE_BYTES, *n)})", "write {{job_id}} {{mount}}"),
        ], "Bps", w=12),
        p.timeseries("I/O stall time per job (some task waiting)", [
            target(f"max by (job_id) ({rate(cfg, s.JOB_IO_PRESSURE, *n, SOME_STALLED)})", "{{job_id}}")],
            "percentunit", min=0, max=1, w=12),
        p.timeseries("NVMe endurance used", [
            target(sel(s.NVME_PERCENTAGE_USED, *n), "{{node}} {{controller}}")], "percentunit", min=0, w=12),
        p.timeseries("NVMe spare left and its threshold", [
            target(sel(s.NVME_AVAILABLE_SPARE, *n), "{{node}} {{controller}}"),
            target(sel(s.NVME_AVAILABLE_SPARE_THRESHOLD, *n), "threshold {{node}} {{controller}}"),
        ], "percentunit", min=0, max=1, w=12),
    ]


def _systems(cfg: Config) -> list:
    """The storage exporter's systems, one series per bucket, file system, view or cluster of each target; client
    hosts (scope host) apart, the ten busiest."""
    t = (cfg.selectors.storage, SYSTEM, NOT_HOSTS)
    hosts = (cfg.selectors.storage, SYSTEM, HOSTS)
    per_host = "target, name"
    per_op = f"{PER_SYSTEM}, op"
    latency = (f"sum by ({per_op}) ({rate(cfg, ss.LATENCY, *t)})\n"
               f"/ (sum by ({per_op}) ({rate(cfg, ss.OPERATIONS, *t)}) > 0)")
    return [
        p.state_timeline("Storage systems answering", [target(sel(ss.UP, *t), "{{target}}")], "none",
                         states={"0": ("down", "red"), "1": ("up", "green")}, w=24, h=5),
        p.timeseries("Storage system read throughput", [
            target(f"sum by ({PER_SYSTEM}) ({rate(cfg, ss.READ_BYTES, *t)})", SYSTEM_LEGEND)], "Bps", w=12),
        p.timeseries("Storage system write throughput (checkpoint bursts)", [
            target(f"sum by ({PER_SYSTEM}) ({rate(cfg, ss.WRITE_BYTES, *t)})", SYSTEM_LEGEND)], "Bps", w=12),
        p.timeseries("Storage system operations", [
            target(f"sum by ({per_op}) ({rate(cfg, ss.OPERATIONS, *t)})", SYSTEM_LEGEND + " {{op}}")], "ops", w=8),
        p.timeseries("Storage system mean latency per operation", [target(latency, SYSTEM_LEGEND + " {{op}}")], "s",
                     w=8),
        p.timeseries("Storage system capacity used", [
            target(f"max by ({PER_SYSTEM}) ({sel(ss.USED, *t)})\n/ (max by ({PER_SYSTEM}) ({sel(ss.CAPACITY, *t)}) > 0)",
                   SYSTEM_LEGEND)], "percentunit", min=0, w=8),
        p.timeseries("Busiest client hosts (WEKA per_host): read and write throughput, top 10", [
            target(f"topk(10, sum by ({per_host}) ({rate(cfg, ss.READ_BYTES, *hosts)}))", "read {{target}} {{name}}"),
            target(f"-topk(10, sum by ({per_host}) ({rate(cfg, ss.WRITE_BYTES, *hosts)}))", "write {{target}} {{name}}"),
        ], "Bps", w=24),
    ]


def build(cfg: Config):
    node = query_variable("node", "Node", f"label_values({sel(s.READ_BYTES, cfg.selectors.node)}, node)",
                          include_all=True)
    system = query_variable("system", "Storage system", f"label_values({sel(ss.TARGET_INFO, cfg.selectors.storage)}, target)",
                            include_all=True)
    return dashboard(cfg, NAME, "lockstep / Storage",
                     "Filesystem clients per mount, checkpoints, NFS latency, local disks, per-job I/O, NVMe health; "
                     "cluster-wide storage systems (MinIO, Ceph RGW, VAST, WEKA).",
                     [*_throughput(cfg), *_checkpoints(cfg), *_nfs_and_disks(cfg), *_jobs_and_nvme(cfg), *_systems(cfg)],
                     [node, system])
