"""Storage metrics: Lustre and NFS clients per mount, local disks per device. Mount labels name the
mount point, the filesystem type and the filesystem name, nothing else."""
from lockstep.exporters.catalog.model import counter, gauge

M = ("mount", "fstype", "fsname")
OP = M + ("op",)
D = ("device",)

READ_BYTES = counter("lockstep_storage_read_bytes_total",
                     "Bytes read through the filesystem client (buffered and direct I/O).", M, "bytes")
WRITE_BYTES = counter("lockstep_storage_write_bytes_total",
                      "Bytes written through the filesystem client (buffered and direct I/O).", M, "bytes")
METADATA_OPS = counter("lockstep_storage_metadata_ops_total",
                       "Metadata operations (open, close, getattr, setattr, unlink, mkdir, rmdir, statfs, ...).",
                       M + ("op",))
READ_CALLS = counter("lockstep_storage_read_calls_total",
                     "Read calls served by the filesystem client (Lustre read_bytes samples).", M)
WRITE_CALLS = counter("lockstep_storage_write_calls_total",
                      "Write calls served by the filesystem client (Lustre write_bytes samples).", M)
DIRECT_READ_BYTES = counter("lockstep_storage_direct_read_bytes_total",
                            "Bytes read with O_DIRECT (NFS directreadbytes); included in read_bytes_total.", M, "bytes")
DIRECT_WRITE_BYTES = counter("lockstep_storage_direct_write_bytes_total",
                             "Bytes written with O_DIRECT (NFS directwritebytes); included in write_bytes_total.",
                             M, "bytes")

NFS_RPC_OPS = counter("lockstep_nfs_rpc_operations_total",
                      "NFS RPC requests completed, per NFS operation (mountstats per-op statistics).", OP)
NFS_RPC_TRANSMISSIONS = counter("lockstep_nfs_rpc_transmissions_total",
                                "NFS RPC transmissions including retransmissions, per operation.", OP)
NFS_RPC_RETRANSMISSIONS = counter("lockstep_nfs_rpc_retransmissions_total",
                                  "NFS RPC retransmissions (transmissions minus requests), per operation.", OP)
NFS_RPC_MAJOR_TIMEOUTS = counter("lockstep_nfs_rpc_major_timeouts_total",
                                 "NFS RPC major timeouts (server not responding), per operation.", OP)
NFS_RPC_RTT = counter("lockstep_nfs_rpc_rtt_seconds_total",
                      "Cumulative NFS RPC round-trip time (request sent to reply received), per operation.",
                      OP, "seconds")
NFS_RPC_EXECUTE = counter("lockstep_nfs_rpc_execute_seconds_total",
                          "Cumulative NFS RPC execution time (queued to completed, client side), per operation.",
                          OP, "seconds")

DISK_READ_BYTES = counter("lockstep_disk_read_bytes_total", "Bytes read from the block device (/proc/diskstats).",
                          D, "bytes")
DISK_WRITE_BYTES = counter("lockstep_disk_written_bytes_total", "Bytes written to the block device.", D, "bytes")
DISK_READS = counter("lockstep_disk_reads_completed_total", "Reads completed by the block device.", D)
DISK_WRITES = counter("lockstep_disk_writes_completed_total", "Writes completed by the block device.", D)
DISK_READ_TIME = counter("lockstep_disk_read_time_seconds_total", "Time spent on reads (all reads summed).",
                         D, "seconds")
DISK_WRITE_TIME = counter("lockstep_disk_write_time_seconds_total", "Time spent on writes (all writes summed).",
                          D, "seconds")
DISK_IO_TIME = counter("lockstep_disk_io_time_seconds_total",
                       "Time the device had I/O in flight (its busy time; rate() is utilization).", D, "seconds")

# Per job, from the job's cgroup v2 group: Slurm's job id, or the Kubernetes pod (its UID, and its job where
# the job mapping knows it). Block devices only: the io controller does not see network file systems.
JOB = ("job_id", "scheduler", "pod_uid")
JOB_DEV = JOB + ("device", "mount", "fstype")
JOB_IO_READ_BYTES = counter("lockstep_job_io_read_bytes_total",
                            "Bytes the job's cgroup read from the block device (cgroup v2 io.stat rbytes); device "
                            "is MAJ:MIN, mount and fstype where the mount table names it.", JOB_DEV, "bytes")
JOB_IO_WRITE_BYTES = counter("lockstep_job_io_write_bytes_total",
                             "Bytes the job's cgroup wrote to the block device (io.stat wbytes).", JOB_DEV, "bytes")
JOB_IO_READS = counter("lockstep_job_io_reads_total", "Read operations of the job's cgroup (io.stat rios).", JOB_DEV)
JOB_IO_WRITES = counter("lockstep_job_io_writes_total", "Write operations of the job's cgroup (io.stat wios).",
                        JOB_DEV)
JOB_IO_PRESSURE = counter("lockstep_job_io_pressure_stalled_seconds_total",
                          "Time the job's tasks were stalled on I/O (cgroup io.pressure total): kind=some, at least "
                          "one task; kind=full, every non-idle task at once.", JOB + ("kind",), "seconds")

# GPUDirect Storage (nvidia-fs). op: read, write, batch (cuFile batch I/O submissions).
GDS_OP = ("op",)
GDS_GPU = ("uuid", "pci_bus_id")
GDS_IO_STATS_ENABLED = gauge("lockstep_gds_io_stats_enabled",
                             "1 while nvidia-fs counts I/O (module parameter rw_stats_enabled); 0: the operation, byte, "
                             "bandwidth and latency series are absent, errors are still counted.")
GDS_OPS = counter("lockstep_gds_operations_total", "GPUDirect Storage operations submitted to nvidia-fs (n=).", GDS_OP)
GDS_OPS_FAILED = counter("lockstep_gds_operations_failed_total", "GPUDirect Storage operations that failed (err=).",
                         GDS_OP)
GDS_IO_STATE_ERRORS = counter("lockstep_gds_io_state_errors_total",
                              "GPUDirect Storage I/Os that failed in nvidia-fs's I/O state machine (io_state_err=).",
                              GDS_OP)
GDS_BYTES = counter("lockstep_gds_bytes_total",
                    "Bytes moved by GPUDirect Storage (readMiB/writeMiB: whole MiB, truncated).", GDS_OP, "bytes")
GDS_BANDWIDTH = gauge("lockstep_gds_bandwidth_bytes_per_second",
                      "nvidia-fs's own throughput over its last window of at least 1 s with I/O (kept while idle).",
                      GDS_OP, "bytes_per_second")
GDS_LATENCY = gauge("lockstep_gds_latency_seconds",
                    "nvidia-fs's own average latency over its last window with I/O (op=batch: submission latency).",
                    GDS_OP, "seconds")
GDS_ERRORS = counter("lockstep_gds_errors_total",
                     "nvidia-fs mapping and DMA errors: type=mmap, bar1_map, cpu_gpu_pages, sg_ext, dma_map, dma_ref.",
                     ("type",))
GDS_SHADOW_BUFFER = gauge("lockstep_gds_shadow_buffer_bytes",
                          "Host bounce (shadow) buffer memory nvidia-fs holds now: I/O not going GPU-direct.", (), "bytes")
GDS_ACTIVE_PROCESSES = gauge("lockstep_gds_active_processes", "Processes using nvidia-fs now.")
GDS_GPU_REGISTERED = gauge("lockstep_gds_gpu_registered_bytes",
                           "GPU memory registered (pinned through BAR1) for GPUDirect Storage now.", GDS_GPU, "bytes")
GDS_GPU_CACHE = gauge("lockstep_gds_gpu_cache_bytes", "Bounce buffer memory nvidia-fs holds for the GPU now.",
                      GDS_GPU, "bytes")
GDS_GPU_MAX_PINNED = gauge("lockstep_gds_gpu_max_pinned_bytes",
                           "The most GPU memory pinned for GPUDirect Storage at once since load or reset.", GDS_GPU, "bytes")
GDS_GPU_CROSS_ROOT_PORT = gauge("lockstep_gds_gpu_cross_root_port_ratio",
                                "Share of the GPU's peer traffic crossing a PCIe root port (peer stats only).",
                                GDS_GPU, "ratio")

# Spectrum Scale (GPFS) waiters on this node now, from mmdiag --waiters (the spectrum-scale collector). reason: a
# fixed class of the waiter's reason text (io, network, other, none); older_than_seconds: 0.1, 1, 10, 60, 300.
GPFS_WAITERS_SUCCESS = gauge("lockstep_gpfs_waiters_success",
                             "1 when the last mmdiag --waiters run (--spectrum-scale.mmdiag-command) succeeded; 0: the "
                             "other waiter series are absent.")
GPFS_WAITERS = gauge("lockstep_gpfs_waiters",
                     "GPFS daemon threads waiting now, per class of their reason (io: I/O completion; network: socket "
                     "or verbs; other; none: no reason given); threads matching --spectrum-scale.waiters-exclude left out.",
                     ("reason",))
GPFS_WAITERS_OLDER_THAN = gauge("lockstep_gpfs_waiters_older_than",
                                "GPFS waiters now that have waited longer than older_than_seconds (cumulative: an age "
                                "histogram of the waiters present, not of past observations).", ("older_than_seconds",))
GPFS_WAITER_OLDEST = gauge("lockstep_gpfs_waiter_oldest_seconds",
                           "How long the oldest GPFS waiter now has waited (0 with no waiter).", (), "seconds")

# Local NVMe controllers (controller: nvme0, ...), from sysfs and the SMART / health log page.
NVME = ("controller",)
NVME_INFO = gauge("lockstep_nvme_info", "An NVMe controller of this node (sysfs model, serial and firmware_rev).",
                  NVME + ("model", "serial", "firmware"))
NVME_SMART_SUCCESS = gauge("lockstep_nvme_smart_success",
                           "1 when the controller's last SMART log read (--nvme.smart-command) succeeded; 0: its health "
                           "series are absent.", NVME)
NVME_PERCENTAGE_USED = gauge("lockstep_nvme_percentage_used_ratio",
                             "Share of the rated endurance used (SMART Percentage Used; may exceed 1).", NVME, "ratio")
NVME_AVAILABLE_SPARE = gauge("lockstep_nvme_available_spare_ratio", "Remaining spare capacity (SMART Available Spare).",
                             NVME, "ratio")
NVME_AVAILABLE_SPARE_THRESHOLD = gauge("lockstep_nvme_available_spare_threshold_ratio",
                                       "Spare below which the controller warns (SMART Available Spare Threshold).",
                                       NVME, "ratio")
NVME_MEDIA_ERRORS = counter("lockstep_nvme_media_errors_total",
                            "Unrecovered data integrity errors (SMART Media and Data Integrity Errors).", NVME)
NVME_CRITICAL_WARNING = gauge("lockstep_nvme_critical_warning",
                              "SMART Critical Warning bits, 1 while set: available_spare, temperature, "
                              "reliability_degraded, read_only, volatile_backup_failed, pmr_read_only.", NVME + ("bit",))
NVME_TEMPERATURE = gauge("lockstep_nvme_temperature_celsius", "Composite temperature (SMART Temperature).", NVME, "celsius")
NVME_READ_BYTES = counter("lockstep_nvme_read_bytes_total",
                          "Bytes read by the host (SMART Data Units Read, 512,000 bytes each).", NVME, "bytes")
NVME_WRITTEN_BYTES = counter("lockstep_nvme_written_bytes_total",
                             "Bytes written by the host (SMART Data Units Written, 512,000 bytes each).", NVME, "bytes")

METRICS = (READ_BYTES, WRITE_BYTES, METADATA_OPS, READ_CALLS, WRITE_CALLS, DIRECT_READ_BYTES, DIRECT_WRITE_BYTES,
           NFS_RPC_OPS, NFS_RPC_TRANSMISSIONS, NFS_RPC_RETRANSMISSIONS, NFS_RPC_MAJOR_TIMEOUTS, NFS_RPC_RTT,
           NFS_RPC_EXECUTE, DISK_READ_BYTES, DISK_WRITE_BYTES, DISK_READS, DISK_WRITES, DISK_READ_TIME,
           DISK_WRITE_TIME, DISK_IO_TIME, JOB_IO_READ_BYTES, JOB_IO_WRITE_BYTES, JOB_IO_READS, JOB_IO_WRITES,
           JOB_IO_PRESSURE, GDS_IO_STATS_ENABLED, GDS_OPS, GDS_OPS_FAILED, GDS_IO_STATE_ERRORS, GDS_BYTES,
           GDS_BANDWIDTH, GDS_LATENCY, GDS_ERRORS, GDS_SHADOW_BUFFER, GDS_ACTIVE_PROCESSES, GDS_GPU_REGISTERED,
           GDS_GPU_CACHE, GDS_GPU_MAX_PINNED, GDS_GPU_CROSS_ROOT_PORT, NVME_INFO, NVME_SMART_SUCCESS, NVME_PERCENTAGE_USED,
           NVME_AVAILABLE_SPARE, NVME_AVAILABLE_SPARE_THRESHOLD, NVME_MEDIA_ERRORS, NVME_CRITICAL_WARNING, NVME_TEMPERATURE,
           NVME_READ_BYTES, NVME_WRITTEN_BYTES, GPFS_WAITERS_SUCCESS, GPFS_WAITERS, GPFS_WAITERS_OLDER_THAN,
           GPFS_WAITER_OLDEST)
