"""Storage metrics: Lustre and NFS clients per mount, local disks per device. Mount labels name the
mount point, the filesystem type and the filesystem name, nothing else."""
from exporters.catalog.model import counter

M = ("mount", "fstype", "fsname")

READ_BYTES = counter("lockstep_storage_read_bytes_total", "Bytes read through the filesystem client.", M, "bytes")
WRITE_BYTES = counter("lockstep_storage_write_bytes_total", "Bytes written through the filesystem client.", M, "bytes")
METADATA_OPS = counter("lockstep_storage_metadata_ops_total",
                       "Metadata operations (open, close, getattr, setattr, unlink, mkdir, rmdir, statfs, ...).",
                       M + ("op",))

METRICS = (READ_BYTES, WRITE_BYTES, METADATA_OPS)
