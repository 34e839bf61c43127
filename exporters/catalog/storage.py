"""Storage metrics: Lustre and NFS clients per mount, local disks per device. Mount labels name the
mount point, the filesystem type and the filesystem name, nothing else."""
from lockstep.exporters.catalog.model import counter

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

METRICS = (READ_BYTES, WRITE_BYTES, METADATA_OPS, READ_CALLS, WRITE_CALLS, DIRECT_READ_BYTES, DIRECT_WRITE_BYTES,
           NFS_RPC_OPS, NFS_RPC_TRANSMISSIONS, NFS_RPC_RETRANSMISSIONS, NFS_RPC_MAJOR_TIMEOUTS, NFS_RPC_RTT,
           NFS_RPC_EXECUTE, DISK_READ_BYTES, DISK_WRITE_BYTES, DISK_READS, DISK_WRITES, DISK_READ_TIME,
           DISK_WRITE_TIME, DISK_IO_TIME, JOB_IO_READ_BYTES, JOB_IO_WRITE_BYTES, JOB_IO_READS, JOB_IO_WRITES,
           JOB_IO_PRESSURE)
