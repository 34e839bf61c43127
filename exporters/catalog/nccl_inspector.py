"""NCCL Inspector's per-GPU Prometheus textfiles, served by the node agent's ``nccl-inspector`` collector.

NCCL's Inspector profiler plugin (``plugins/profiler/inspector/`` in NVIDIA/nccl, 2.29.3 and later; loaded with
``NCCL_PROFILER_PLUGIN``, on with ``NCCL_INSPECTOR_ENABLE=1`` and ``NCCL_INSPECTOR_PROM_DUMP=1``) rewrites one file
per GPU, ``nccl_inspector_metrics_<CUDA device UUID>.prom`` in ``NCCL_INSPECTOR_DUMP_DIR``, every
``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS`` (30 s at least). Two layouts exist:

- 2.29.3 to 2.29.7: the last collective each communicator completed in the interval, labelled with its
  communicator hash (``comm_id``) and ``rank``;
- 2.30.3 and later: buckets per communicator name, collective (or point-to-point operation), message size range
  and algorithm/protocol, each the interval's geometric mean bus bandwidth and mean execution time; ``node`` and
  ``gpu`` (``GPU<CUDA ordinal>``) say where the rank runs, no ``rank`` label any more.

Here they are one family per quantity in base units. ``job_id`` is the job holding the GPU in the node's job
mapping (a Kubernetes job's ``namespace/name`` too), else NCCL's ``slurm_job_id`` where it is not ``unknown``;
``gpu`` and ``uuid`` are the GPU collector's (the file name's UUID). NCCL's own labels follow under their own names,
empty where the writing release has none (Prometheus drops empty labels). Left out: ``hostname``/``node`` (the
scrape target names the node), NCCL's ``gpu``/``gpu_device_id`` (the process's CUDA ordinal; ``uuid`` names the
device), ``slurm_job``, ``version``, and 2.29's ``coll_sn`` and ``timestamp``, which change with every rewrite and
would make a new series each interval. ``--nccl-inspector.metric-names=nccl`` also serves NCCL's own names and
labels (those two left out the same way) for NCCL's Grafana template.
"""
from lockstep.exporters.catalog.model import counter, gauge

# Why a read of an Inspector file was not used (lockstep_nccl_inspector_reads_skipped_total).
SKIP_REASONS = ("writing", "truncated", "malformed", "too_large", "unreadable")
# What a scrape did with each Inspector file in the directory.
FILE_STATES = ("served", "stale", "skipped")
# The collector's caps (lockstep_nccl_inspector_limit, lockstep_nccl_inspector_capped).
CAPS = ("files", "communicators", "message_sizes", "file_bytes")

GPU = ("job_id", "gpu", "uuid")
COLLECTIVE = GPU + ("comm_id", "comm_name", "rank", "nranks", "n_nodes", "collective", "message_size", "algo_proto")
P2P = GPU + ("comm_name", "nranks", "n_nodes", "p2p_operation", "message_size")

_COLL_HELP = (" Labels: NCCL's, 2.29 (comm_id, rank, message_size as written: 2.00GB) or 2.30 (comm_name, "
              "algo_proto, message_size as a range: 4-5GB), the other layout's empty.")

BUS_BANDWIDTH = gauge(
    "lockstep_nccl_inspector_bus_bandwidth_bytes_per_second",
    "Bus bandwidth of the rank's collectives as NCCL Inspector measured them (nccl_bus_bandwidth_gbs, GB/s "
    "converted): NCCL 2.30, the geometric mean over the dump interval per bucket; 2.29, the communicator's last "
    "collective of the interval. A rank that arrives last at a synchronous collective waits least inside the "
    "kernel and shows the highest bandwidth; its peers show low ones." + _COLL_HELP, COLLECTIVE, "bytes_per_second")
ALGORITHM_BANDWIDTH = gauge(
    "lockstep_nccl_inspector_algorithm_bandwidth_bytes_per_second",
    "Algorithm bandwidth of the rank's last collective of the interval (nccl_algorithm_bandwidth_gbs: NCCL 2.29 "
    "only)." + _COLL_HELP, COLLECTIVE, "bytes_per_second")
EXEC_TIME = gauge(
    "lockstep_nccl_inspector_collective_exec_time_seconds",
    "Execution time of the rank's collectives as NCCL Inspector measured them (nccl_collective_exec_time_"
    "microseconds, converted): 2.30, the mean over the dump interval per bucket; 2.29, the last collective's. It "
    "includes the time the rank waited inside the kernel for its peers: in a synchronous collective the slowest "
    "rank arrives last and shows the shortest time." + _COLL_HELP, COLLECTIVE, "seconds")
P2P_BUS_BANDWIDTH = gauge(
    "lockstep_nccl_inspector_p2p_bus_bandwidth_bytes_per_second",
    "Bus bandwidth of the rank's point-to-point operations (nccl_p2p_bus_bandwidth_gbs, NCCL 2.30 and later; GB/s "
    "converted): the geometric mean over the dump interval per communicator, operation (Send, Recv) and message "
    "size range.", P2P, "bytes_per_second")
P2P_EXEC_TIME = gauge(
    "lockstep_nccl_inspector_p2p_exec_time_seconds",
    "Mean execution time of the rank's point-to-point operations over the dump interval "
    "(nccl_p2p_exec_time_microseconds, NCCL 2.30 and later, converted).", P2P, "seconds")

FILE_AGE = gauge(
    "lockstep_nccl_inspector_file_age_seconds",
    "Time since NCCL last rewrote the GPU's Inspector file (its modification time). NCCL 2.30 rewrites it only in "
    "intervals with completed operations: a job that stopped completing collectives lets it age. Past "
    "--nccl-inspector.max-age its series are no longer served (an idle or hung job, or a process that died "
    "without removing it).", GPU, "seconds")
FILES = gauge(
    "lockstep_nccl_inspector_files",
    f"Inspector files in the directory by what this scrape did with them: {', '.join(FILE_STATES)} (served: its "
    "series are in this scrape, from this read or, while NCCL is rewriting it, from its last complete read; "
    "stale: older than --nccl-inspector.max-age; skipped: nothing of it served, see "
    "lockstep_nccl_inspector_reads_skipped_total).", ("state",))
READS_SKIPPED = counter(
    "lockstep_nccl_inspector_reads_skipped_total",
    f"Reads of an Inspector file that were not used, by reason: {', '.join(SKIP_REASONS)} (writing: modified "
    "within --nccl-inspector.settle or while being read, NCCL rewrites it in place; truncated: it does not end "
    "with a line end, or a bucket lacks one of its lines; malformed: a line that is not the exposition format or "
    "not UTF-8; too_large: over --nccl-inspector.max-file-bytes; unreadable: an error reading it). A file is "
    "never served in part.", ("reason",))
CAPPED = gauge(
    "lockstep_nccl_inspector_capped",
    f"What each cap ({', '.join(CAPS[:3])}) left out of this scrape: files beyond --nccl-inspector.max-files (in "
    "name order), communicators of a GPU beyond --nccl-inspector.max-communicators (the most ranks kept), message "
    "sizes of a communicator's operation beyond --nccl-inspector.max-message-sizes (the largest kept), summed over "
    "the GPUs.", ("cap",))
LIMIT = gauge(
    "lockstep_nccl_inspector_limit",
    f"The collector's caps: {', '.join(CAPS)} (files read per scrape, communicators per GPU, message sizes per "
    "communicator and operation, bytes read of one file).", ("cap",))

DATA = (BUS_BANDWIDTH, ALGORITHM_BANDWIDTH, EXEC_TIME, P2P_BUS_BANDWIDTH, P2P_EXEC_TIME)
METRICS = DATA + (FILE_AGE, FILES, READS_SKIPPED, CAPPED, LIMIT)
