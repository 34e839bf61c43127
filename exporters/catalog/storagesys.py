"""Cluster-wide storage systems read by the storage exporter (``lockstep storage-exporter``): one small
common set per target and file system, view or bucket, whatever system answers. Each HELP names the
source fields a kind maps; a kind whose source lacks a field leaves the metric out (absent, not zero)."""
from lockstep.exporters.catalog.model import counter, gauge

T = ("target",)
# scope: bucket (MinIO, Ceph RGW), filesystem (WEKA: capacity, and I/O for a target with `per_filesystem: true`), view
# (VAST, a target with `views: true`: named by the view's `path` label), host (WEKA, a target with `per_host: true`:
# the I/O of one host's frontend processes, named by its hostname), cluster (a whole system; Ceph RGW: the gateways
# one ceph-exporter serves, name "rgw"; VAST: the cluster, named by its `cluster` label; WEKA: named by the target's
# name); name: its name there (Ceph RGW: "tenant/bucket" for a tenant's bucket).
S = ("target", "scope", "name")
# The scope of one client host's share of a system's I/O (WEKA, per_host: true): a breakdown of the system's own
# series, not a system of its own, so StorageLatencyHigh and the storage dashboard's per-system panels leave it out
# (a slow system would otherwise open a ticket per client), and the dashboard shows its busiest clients apart.
HOST_SCOPE = "host"

READ_BYTES = counter("lockstep_storage_system_read_bytes_total",
                     "Bytes read by clients from the file system, view or bucket. MinIO: "
                     "minio_bucket_traffic_sent_bytes summed over the cluster's servers. Ceph RGW: "
                     "ceph_rgw_op[_per_bucket]_get_obj_bytes summed over the host's gateways. VAST: "
                     "vast_cnode_metrics_ProtoMetrics_read_size_sum{proto_name=\"ProtoCommon\"} summed over the CNodes "
                     "(before 5.2.0-sp22: vast_cluster_metrics_ProtoMetrics_read_size_sum{proto_name=\"ProtoAll\"}), "
                     "scope cluster; per view (views: true) vast_view_metrics_ViewMetrics_read_bw_sum, scope view. "
                     "WEKA: READ_BYTES (bytes/s) of JSON-RPC stats_show, category ops, for the whole "
                     "cluster: per-second averages over one-minute buckets, integrated (each minute counted once, its "
                     "rate times 60 s; the exporter's first poll counts its newest minute only), scope cluster; per "
                     "host (per_host: true) the same stats_show with per_node, summed over the host's FRONTEND nodes "
                     "(nodes_list), scope host named by its hostname; per file system (per_filesystem: true) "
                     "stats_show of category fs_stats, one call per stat for every file system, READ_BYTES[fS: n] "
                     "integrated likewise, scope filesystem named by the name filesystems_get_capacity gives FSId<n>.",
                     S, "bytes")
WRITE_BYTES = counter("lockstep_storage_system_write_bytes_total",
                      "Bytes written by clients to the file system, view or bucket. MinIO: "
                      "minio_bucket_traffic_received_bytes summed over the cluster's servers. Ceph RGW: "
                      "ceph_rgw_op[_per_bucket]_put_obj_bytes. VAST: ..._ProtoMetrics_write_size_sum, as for reads; per view "
                      "vast_view_metrics_ViewMetrics_write_bw_sum. "
                      "WEKA: WRITE_BYTES, integrated as for reads (per host and per file system likewise).", S, "bytes")
OPERATIONS = counter("lockstep_storage_system_operations_total",
                     "Operations (requests) served, by the system's own operation name. op: MinIO's S3 API name "
                     "(minio_bucket_requests_total{api}, lower case: getobject, putobject, ...); Ceph RGW's op counter name "
                     "(ceph_rgw_op[_per_bucket]_<op>_ops: put_obj, get_obj, del_obj, del_bucket, copy_obj, list_obj, "
                     "list_buckets); VAST's read and write (..._ProtoMetrics_{read,write}_size_count, all protocols; per view "
                     "vast_view_metrics_ViewMetrics_{read,write}_iops_count); "
                     "WEKA's read and write (ops READS, WRITES, operations/s, integrated as for bytes, per host and "
                     "per file system likewise).",
                     S + ("op",))
ERRORS = counter("lockstep_storage_system_operation_errors_total",
                 "Operations that failed. class: client (MinIO minio_bucket_requests_4xx_errors_total), server "
                 "(minio_bucket_requests_5xx_errors_total); summed over operations and servers; failed (Ceph RGW "
                 "ceph_rgw_failed_req, aborted requests of any cause, scope cluster only).", S + ("class",))
LATENCY = counter("lockstep_storage_system_operation_latency_seconds_total",
                  "Total time spent in operations; divided by the rate of "
                  "lockstep_storage_system_operations_total of the same op, the mean latency. Only from systems "
                  "that report latency: Ceph RGW ceph_rgw_op[_per_bucket]_<op>_lat_sum; VAST "
                  "..._ProtoMetrics_{read,write}_latency_sum (microseconds, converted; per view "
                  "vast_view_metrics_ViewMetrics_{read,write}_latency_sum, likewise); WEKA ops READ_LATENCY, "
                  "WRITE_LATENCY (the mean per operation, microseconds) times that minute's operations, per minute "
                  "(a minute whose latency is null adds nothing; per host each FRONTEND node's own, summed; per file "
                  "system fs_stats's, likewise). MinIO's "
                  "v2 bucket "
                  "metrics carry a time-to-first-byte histogram without a sum: absent there.", S + ("op",), "seconds")
USED = gauge("lockstep_storage_system_used_bytes",
             "Bytes stored in the file system, view or bucket. MinIO: minio_bucket_usage_total_bytes. VAST: "
             "vast_cluster_logical_space_in_use (before data reduction); per view vast_view_logical_capacity (no "
             "capacity_bytes there). WEKA: used_total of "
             "filesystems_get_capacity, scope filesystem.", S, "bytes")
CAPACITY = gauge("lockstep_storage_system_capacity_bytes",
                 "Bytes the file system, view or bucket may hold. MinIO: minio_bucket_quota_total_bytes, where a "
                 "quota is set. VAST: vast_cluster_logical_space. WEKA: available_total of filesystems_get_capacity "
                 "(the file system's size; its free space is this less used_total), scope filesystem.", S, "bytes")
OBJECTS = gauge("lockstep_storage_system_objects",
                "Objects (files) stored. MinIO: minio_bucket_usage_object_total.", S)

TARGET_INFO = gauge("lockstep_storage_system_target_info",
                    "Always 1; the kind (weka, vast, minio, ceph-rgw) and address of a configured storage system.",
                    ("target", "kind", "address"))
HOST_INFO = gauge("lockstep_storage_system_host_info",
                  "Always 1; per host with series at scope host (WEKA, per_host: true), its role: server (a WEKA "
                  "backend: hosts_list mode backend) or client (any other mode), as WEKA's own exporter reads it. "
                  "name is the series' name (the hostname), so that "
                  "... * on (target, name) group_left (role) lockstep_storage_system_host_info "
                  "splits them; absent for a host hosts_list does not name.", ("target", "name", "role"))
UP = gauge("lockstep_storage_system_up", "1 if the last poll of the storage system succeeded, 0 otherwise. A part "
           "the target opted in to (VAST's views, WEKA's per_host) failing alone leaves it 1.", T)
POLL_DURATION = gauge("lockstep_storage_system_poll_duration_seconds",
                      "Wall-clock time of the last poll of the storage system.", T, "seconds")
POLL_FAILURES = counter("lockstep_storage_system_poll_failures_total",
                        "Polls of the storage system that failed since the exporter started. reason: timeout (no "
                        "answer within timeout_s), connect (refused, reset, TLS), http (an error status), parse "
                        "(an answer that is not the system's format), internal (an error of the exporter's own reading: a bug, "
                        "logged with its traceback). A part the target opted in to (VAST's views: true, WEKA's "
                        "per_host: true) that fails "
                        "while the rest is read counts here too, by its reason, with up staying 1 and only that "
                        "part's series left out.", T + ("reason",))
LAST_SUCCESS = gauge("lockstep_storage_system_last_success_timestamp_seconds",
                     "Unix time of the last successful poll of the storage system.", T, "seconds")

METRICS = (READ_BYTES, WRITE_BYTES, OPERATIONS, ERRORS, LATENCY, USED, CAPACITY, OBJECTS,
           TARGET_INFO, HOST_INFO, UP, POLL_DURATION, POLL_FAILURES, LAST_SUCCESS)
