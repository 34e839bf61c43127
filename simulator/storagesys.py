"""The simulated cluster's storage systems as their own interfaces answer, built from the model's state at each
tick: one MinIO checkpoint tier (``/minio/v2/metrics/bucket``), one VAST cluster (VMS's ``/api/prometheusmetrics/``
and, per view, ``/api/prometheusmetrics/views``) and one WEKA cluster (the JSON-RPC ``stats_show``, for the cluster
and per node, ``nodes_list``, ``hosts_list`` and ``filesystems_get_capacity`` results). Pure: ``Systems`` follows the
ticks, the ``*_answer`` functions turn it into text or JSON; ``storagesys_app`` serves them.

What each system sees of the job (the split), from the per-node counters of ``State.storage``:
- VAST (cluster ``vast-sim``, two CNodes sharing the load evenly, every byte over NFS): the job's dataset reads,
  every byte its nodes read (``lustre_read_bytes``), and its logs and metrics, what they write that is not a
  checkpoint (``lustre_write_bytes`` less ``lustre_ckpt_bytes``); per view, the dataset reads are the view
  ``/datasets``'s and the logs the view ``/logs``'s (tenant ``default``), a view's latency that of the cluster's
  load;
- WEKA (cluster ``weka-sim``): each checkpoint as the job writes it (``lustre_ckpt_bytes``), into its file system
  ``checkpoints`` (``fs_stats``: all of the cluster's I/O is that file system's, ``default`` idle); nothing is read
  back (the job never restarts from one here). Per node: every simulated node is a WEKA client host of its own
  name (``node00``, ...) with one FRONTEND node (``NodeId<100+i>``), writing its own share of each checkpoint (its
  ``lustre_ckpt_bytes``) at the cluster's latency; two backend hosts (``weka-backend-1``, ``-2``) hold a COMPUTE and
  a DRIVES node each and no I/O of their own in ``ops``;
- MinIO (bucket ``checkpoints`` on one server): a copy of each checkpoint, uploaded in the same tick.
The node trees show the same bytes on the nodes' ``/lustre`` mount: one I/O stream, seen from the clients there and
from the systems here. Each system starts from fixed totals (what it served and held before the run: ``*_BASE``).

Counters only grow: bytes are the totals plus the state's counters; operations are bytes over a fixed I/O size;
each tick's operations take a latency that rises with the system's load (``latency_us``); used bytes grow with
what is written. The metric, label, field and method names are the ones the fixtures under tests/fixtures/{minio,
vast,weka} hold (their READMEs: which are recorded and which constructed) and the storage exporter reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from lockstep.simulator.scenario import node_name
from lockstep.simulator.state import State

# the endpoints, as each system serves them (the storage exporter knows them by kind)
MINIO_PATH, VAST_PATH, WEKA_PATH = "/minio/v2/metrics/bucket", "/api/prometheusmetrics/", "/api/v1"
VAST_VIEWS_PATH = "/api/prometheusmetrics/views"
MIB = 1 << 20
MINIO_SERVER = "minio-1:9000"
BUCKET = "checkpoints"
OBJECT_BYTES = 256 * MIB          # a checkpoint's shards, one PutObject each
VAST_CLUSTER = "vast-sim"
CNODES = ("cnode-1", "cnode-2")
PROTOCOLS = ("ProtoCommon", "NFSCommon")   # all protocols, and NFS, which carries all of it here
VAST_TENANT = "default"
DATASETS_VIEW, LOGS_VIEW = "/datasets", "/logs"   # the job's dataset reads, and its logs and metrics
WEKA_FILESYSTEMS = ("default", "checkpoints")
MINUTE_S = 60.0                   # WEKA's statistics: per-second averages over one-minute buckets
# WEKA's backends, each with its node ids and their roles; every simulated node is a client with one FRONTEND node
WEKA_BACKENDS = {"weka-backend-1": ((1, "COMPUTE"), (2, "DRIVES")), "weka-backend-2": ((3, "COMPUTE"), (4, "DRIVES"))}
WEKA_CLIENT_NODE_ID = 100         # node i's FRONTEND is NodeId<100 + i>


@dataclass(frozen=True)
class Profile:
    """One system's I/O: the size of an operation, its latency unloaded and the bandwidth that saturates it."""

    read_io: int
    write_io: int
    read_latency_us: float
    write_latency_us: float
    bandwidth: float              # bytes/s, reads and writes together


VAST = Profile(read_io=1 * MIB, write_io=64 * 1024, read_latency_us=600.0, write_latency_us=900.0, bandwidth=40e9)
WEKA = Profile(read_io=1 * MIB, write_io=1 * MIB, read_latency_us=300.0, write_latency_us=500.0, bandwidth=100e9)
# Fixed starting totals: bytes each system had served and held when the run began.
VAST_READ_BASE, VAST_WRITE_BASE = 3_000_000_000_000_000, 400_000_000_000_000
VAST_LOGICAL_SPACE, VAST_IN_USE_BASE, VAST_DRR = 4_000_000_000_000_000, 1_600_000_000_000_000, 2.0
# the two views' shares of those (the rest: the cluster's other views): bytes read and written before the run, held
VIEW_READ_BASE = {DATASETS_VIEW: 2_000_000_000_000_000, LOGS_VIEW: 1_000_000_000_000}
VIEW_WRITE_BASE = {DATASETS_VIEW: 500_000_000_000_000, LOGS_VIEW: 50_000_000_000_000}
VIEW_HELD_BASE = {DATASETS_VIEW: 500_000_000_000_000, LOGS_VIEW: 40_000_000_000_000}
WEKA_READ_BASE, WEKA_WRITE_BASE = 200_000_000_000_000, 600_000_000_000_000
WEKA_SIZES = {"default": 11_000_000_000_000, "checkpoints": 2_000_000_000_000_000}
WEKA_USED_BASE = {"default": 1_100_000_000_000, "checkpoints": 200_000_000_000_000}
WEKA_SSD_SHARE = 0.2              # the SSD tier's share of each file system
MINIO_RECEIVED_BASE, MINIO_SENT_BASE, MINIO_USED_BASE = 500_000_000_000_000, 100_000_000_000_000, 400_000_000_000_000


def latency_us(base_us: float, bytes_per_s: float, bandwidth: float) -> float:
    """The mean latency of one operation at a load: the unloaded latency over the idle share of the bandwidth (a
    queue's growth), the load counted at most 90 % of the bandwidth."""
    return base_us / (1.0 - min(bytes_per_s / bandwidth, 0.9))


@dataclass
class Flow:
    """One system's counters: bytes, operations and the latency total of each direction (microseconds)."""

    profile: Profile
    read_bytes: int
    write_bytes: int
    read_latency_us: float = field(init=False)
    write_latency_us: float = field(init=False)

    def __post_init__(self) -> None:   # the operations before the run, unloaded
        self.read_latency_us = self.read_ops * self.profile.read_latency_us
        self.write_latency_us = self.write_ops * self.profile.write_latency_us

    @property
    def read_ops(self) -> int:
        return self.read_bytes // self.profile.read_io

    @property
    def write_ops(self) -> int:
        return self.write_bytes // self.profile.write_io

    def add(self, read: int, write: int, seconds: float, load: float | None = None) -> tuple[int, int, float, float]:
        """``read`` and ``write`` more bytes over ``seconds``: the operations and latency totals they add. The latency
        follows ``load`` (bytes/s) where given (a view: its system's load), else these bytes' own."""
        ops = self.read_ops, self.write_ops
        self.read_bytes += read
        self.write_bytes += write
        if load is None:
            load = (read + write) / seconds if seconds > 0 else 0.0
        added = (self.read_ops - ops[0], self.write_ops - ops[1])
        lat = (added[0] * latency_us(self.profile.read_latency_us, load, self.profile.bandwidth),
               added[1] * latency_us(self.profile.write_latency_us, load, self.profile.bandwidth))
        self.read_latency_us += lat[0]
        self.write_latency_us += lat[1]
        return (*added, *lat)


def _job_bytes(s: State) -> tuple[int, int, int]:
    """The job's (dataset reads, logs and metrics, checkpoints) so far: bytes, summed over its nodes."""
    storage = s.storage
    read, write, ckpt = (int(storage[key].sum()) for key in ("lustre_read_bytes", "lustre_write_bytes",
                                                             "lustre_ckpt_bytes"))
    return read, write - ckpt, ckpt


@dataclass
class Minute:
    """What WEKA's cluster did in one minute: bytes, operations and latency totals, (read, write) each."""

    bytes: list[float] = field(default_factory=lambda: [0.0, 0.0])
    ops: list[float] = field(default_factory=lambda: [0.0, 0.0])
    latency_us: list[float] = field(default_factory=lambda: [0.0, 0.0])


class Systems:
    """The three systems following the model's ticks: built from the first, then ``advance`` with each next one."""

    KEEP_MINUTES = 10

    def __init__(self, first: State, period_s: float) -> None:
        self.period = period_s
        self.timestamp = first.timestamp
        # the state's counters so far are the job's bytes before the first tick (another run's, --counters-from)
        self.seen = _job_bytes(first)          # (dataset reads, logs and metrics, checkpoints) so far
        read, logs, ckpt = self.seen
        self.vast = Flow(VAST, VAST_READ_BASE + read, VAST_WRITE_BASE + logs)
        self.views = {DATASETS_VIEW: Flow(VAST, VIEW_READ_BASE[DATASETS_VIEW] + read, VIEW_WRITE_BASE[DATASETS_VIEW]),
                      LOGS_VIEW: Flow(VAST, VIEW_READ_BASE[LOGS_VIEW], VIEW_WRITE_BASE[LOGS_VIEW] + logs)}
        self.weka = Flow(WEKA, WEKA_READ_BASE, WEKA_WRITE_BASE + ckpt)
        self.checkpoint_bytes = ckpt           # the job's checkpoints: what WEKA and MinIO took
        self.minutes: dict[int, Minute] = {}
        self.first_minute: int | None = None
        # per node: its checkpoint bytes so far, WEKA's flow from its FRONTEND, and its minutes (index -> node -> Minute)
        self.node_ckpt = [int(v) for v in first.storage["lustre_ckpt_bytes"]]
        self.node_names = tuple(node_name(i) for i in range(len(self.node_ckpt)))
        self.node_flows = [Flow(WEKA, 0, v) for v in self.node_ckpt]
        self.node_minutes: dict[int, dict[int, Minute]] = {}

    def advance(self, s: State) -> None:
        now = _job_bytes(s)
        d_read, d_logs, d_ckpt = (max(a - b, 0) for a, b in zip(now, self.seen))
        self.seen, self.timestamp = now, s.timestamp
        self.vast.add(d_read, d_logs, self.period)
        load = (d_read + d_logs) / self.period if self.period > 0 else 0.0
        self.views[DATASETS_VIEW].add(d_read, 0, self.period, load)
        self.views[LOGS_VIEW].add(0, d_logs, self.period, load)
        self.checkpoint_bytes += d_ckpt
        at = s.timestamp - self.period
        self._minute(at, 0, d_ckpt, self.weka.add(0, d_ckpt, self.period))
        weka_load = d_ckpt / self.period if self.period > 0 else 0.0
        for i, total in enumerate(int(v) for v in s.storage["lustre_ckpt_bytes"]):
            d_node, self.node_ckpt[i] = max(total - self.node_ckpt[i], 0), total
            if d_node:   # a node's latency is the cluster's: it follows the system's load
                added = self.node_flows[i].add(0, d_node, self.period, weka_load)
                node = self.node_minutes.setdefault(int(at // MINUTE_S), {}).setdefault(i, Minute())
                _add(node, 0, d_node, added)
        for old in [k for k in self.node_minutes if k < int(at // MINUTE_S) - self.KEEP_MINUTES]:
            del self.node_minutes[old]

    def view_held(self, path: str) -> int:
        """The bytes a view holds: its start, and what the job wrote to it since (the dataset is only read)."""
        return VIEW_HELD_BASE[path] + self.views[path].write_bytes - VIEW_WRITE_BASE[path]

    def _minute(self, at: float, read: int, write: int, added: tuple[int, int, float, float]) -> None:
        """The tick's WEKA traffic into the minute its interval began in."""
        index = int(at // MINUTE_S)
        if self.first_minute is None:
            self.first_minute = index
        _add(self.minutes.setdefault(index, Minute()), read, write, added)
        for old in [k for k in self.minutes if k < index - self.KEEP_MINUTES]:
            del self.minutes[old]

    def _complete(self, count: int) -> range:
        """The indices of the newest ``count`` whole minutes (ended by the last tick), oldest first."""
        if self.first_minute is None:
            return range(0)
        last = int(self.timestamp // MINUTE_S) - 1
        return range(max(self.first_minute, last - count + 1, last - self.KEEP_MINUTES + 1), last + 1)

    def complete_minutes(self, count: int) -> list[tuple[int, Minute]]:
        """The newest ``count`` whole minutes (ended by the last tick), oldest first; one without traffic is zeros."""
        return [(i, self.minutes.get(i, Minute())) for i in self._complete(count)]

    def complete_node_minutes(self, count: int) -> list[tuple[int, dict[int, Minute]]]:
        """The same minutes per node: node index -> its minute (a node without traffic in it absent)."""
        return [(i, self.node_minutes.get(i, {})) for i in self._complete(count)]


def _add(m: Minute, read: int, write: int, added: tuple[int, int, float, float]) -> None:
    for i, (b, ops, lat) in enumerate(((read, added[0], added[2]), (write, added[1], added[3]))):
        m.bytes[i] += b
        m.ops[i] += ops
        m.latency_us[i] += lat


def minio_answer(systems: Systems) -> str:
    """MinIO's ``/minio/v2/metrics/bucket`` (tests/fixtures/minio/bucket-metrics.prom's families and HELP text):
    the bucket's traffic and PutObject requests from its one server, its usage from the data-usage scan."""
    received = MINIO_RECEIVED_BASE + systems.checkpoint_bytes
    used = MINIO_USED_BASE + systems.checkpoint_bytes
    labels = f'bucket="{BUCKET}",server="{MINIO_SERVER}"'
    families = (
        ("minio_bucket_requests_total", "counter", "Total number of S3 requests on a bucket",
         f'api="putobject",{labels}', received // OBJECT_BYTES),
        ("minio_bucket_traffic_received_bytes", "gauge", "Total number of S3 bytes received for this bucket",
         labels, received),
        ("minio_bucket_traffic_sent_bytes", "gauge", "Total number of S3 bytes sent for this bucket", labels,
         MINIO_SENT_BASE),
        ("minio_bucket_usage_object_total", "gauge", "Total number of objects", labels, -(-used // OBJECT_BYTES)),
        ("minio_bucket_usage_total_bytes", "gauge", "Total bucket size in bytes", labels, used),
    )
    return "".join(f"# HELP {name} {text}\n# TYPE {name} {kind}\n{name}{{{series}}} {value}\n"
                   for name, kind, text, series, value in families)


def _halves(value: float) -> tuple[int, int]:
    """A total shared by the two CNodes (each share only grows as the total does)."""
    total = int(value)
    return total // 2, total - total // 2


def vast_answer(systems: Systems) -> str:
    """VMS's ``/api/prometheusmetrics/`` as tests/fixtures/vast/prometheusmetrics-cluster.prom holds it (VAST
    5.2.0-sp22 and later): each CNode's protocol counters (bytes, operations, latency in microseconds) and the
    cluster's capacity."""
    f = systems.vast
    fields = {"read_size_sum": f.read_bytes, "read_size_count": f.read_ops, "read_latency_sum": f.read_latency_us,
              "read_latency_count": f.read_ops, "write_size_sum": f.write_bytes, "write_size_count": f.write_ops,
              "write_latency_sum": f.write_latency_us, "write_latency_count": f.write_ops}
    lines = []
    for i, cnode in enumerate(CNODES):
        for proto in PROTOCOLS:
            lines += [f'vast_cnode_metrics_ProtoMetrics_{name}{{cluster="{VAST_CLUSTER}",hostname="{cnode}",'
                      f'proto_name="{proto}"}} {_halves(value)[i]}' for name, value in fields.items()]
    in_use = VAST_IN_USE_BASE + f.write_bytes - VAST_WRITE_BASE
    cluster = f'{{cluster="{VAST_CLUSTER}"}}'
    lines += [f"vast_cluster_logical_space{cluster} {VAST_LOGICAL_SPACE}",
              f"vast_cluster_logical_space_in_use{cluster} {in_use}",
              f"vast_cluster_physical_space{cluster} {int(VAST_LOGICAL_SPACE / VAST_DRR)}",
              f"vast_cluster_physical_space_in_use{cluster} {int(in_use / VAST_DRR)}",
              f"vast_cluster_drr{cluster} {VAST_DRR:g}"]
    return "\n".join(lines) + "\n"


def vast_views_answer(systems: Systems) -> str:
    """VMS's ``/api/prometheusmetrics/views`` as tests/fixtures/vast/prometheusmetrics-views.prom holds it: per view
    (``/datasets``, ``/logs``) its counters (bytes, operations, latency in microseconds and its count) and its logical
    and physical capacity (the logical over the cluster's data-reduction ratio)."""
    labels = {path: f'{{cluster="{VAST_CLUSTER}",path="{path}",tenant_name="{VAST_TENANT}"}}' for path in systems.views}
    lines = []
    for path, f in systems.views.items():
        fields = {"read_bw_sum": f.read_bytes, "read_iops_count": f.read_ops, "read_latency_sum": f.read_latency_us,
                  "read_latency_count": f.read_ops, "write_bw_sum": f.write_bytes, "write_iops_count": f.write_ops,
                  "write_latency_sum": f.write_latency_us, "write_latency_count": f.write_ops}
        lines += [f"vast_view_metrics_ViewMetrics_{name}{labels[path]} {int(value)}" for name, value in fields.items()]
    for path in systems.views:
        held = systems.view_held(path)
        lines += [f"vast_view_logical_capacity{labels[path]} {held}",
                  f"vast_view_physical_capacity{labels[path]} {int(held / VAST_DRR)}"]
    return "\n".join(lines) + "\n"


def _stats(m: Minute) -> dict[str, float | None]:
    """A minute as WEKA's ``ops`` statistics: per-second averages; the mean latency per operation (null without one)."""
    out: dict[str, float | None] = {}
    for i, op in enumerate(("READ", "WRITE")):
        out[f"{op}S"] = round(m.ops[i] / MINUTE_S, 3)
        out[f"{op}_BYTES"] = round(m.bytes[i] / MINUTE_S, 3)
        out[f"{op}_LATENCY"] = round(m.latency_us[i] / m.ops[i], 3) if m.ops[i] else None
    return out


WEKA_STATS = frozenset(_stats(Minute()))   # the ``ops`` (and ``fs_stats``) statistics this WEKA serves


def weka_stats_answer(systems: Systems, stats: list[str], minutes: int) -> dict:
    """The ``result`` of ``stats_show`` for the whole cluster (tests/fixtures/weka/stats-show-ops.json's shape):
    ``{"all": {"ops": [{"stats": {...}, "timestamp": ...}, ...]}}``, one item per whole minute, the asked stats of
    category ``ops`` only (``stats`` without the ``ops.`` prefix)."""
    items = []
    for index, minute in systems.complete_minutes(minutes):
        values = _stats(minute)
        items.append({"stats": {name: values[name] for name in stats if name in values}, "timestamp": _timestamp(index)})
    return {"all": {"ops": items}}


def weka_fs_stats_answer(systems: Systems, stat: str, minutes: int, fs_id: str = "*") -> dict:
    """The ``result`` of ``stats_show`` of category ``fs_stats`` for one stat (tests/fixtures/weka/
    stats-show-fs-stats.json's shape): ``{"all": {"fs_stats": [{"stats": {"STAT[fS: <id>]": ...}, "timestamp":
    ...}, ...]}}``, one item per whole minute, every file system (``fs_id`` ``*``) or the one asked; all of the
    cluster's I/O is ``checkpoints``'s, ``default`` does nothing (a null latency, as the cluster's without
    operations)."""
    busy = WEKA_FILESYSTEMS.index("checkpoints")
    ids = [i for i in range(len(WEKA_FILESYSTEMS)) if fs_id in ("*", str(i))]
    items = []
    for index, minute in systems.complete_minutes(minutes):
        values, idle = _stats(minute), _stats(Minute())
        items.append({"stats": {f"{stat}[fS: {i}]": (values if i == busy else idle).get(stat) for i in ids},
                      "timestamp": _timestamp(index)})
    return {"all": {"fs_stats": items}}


def _timestamp(index: int) -> str:
    return datetime.fromtimestamp(index * MINUTE_S, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def weka_client_node_id(i: int) -> str:
    return f"NodeId<{WEKA_CLIENT_NODE_ID + i}>"


def weka_node_stats_answer(systems: Systems, stats: list[str], minutes: int, no_zeroes: bool = True,
                           node_ids: set[str] | None = None) -> dict:
    """The ``result`` of ``stats_show`` with ``per_node`` (tests/fixtures/weka/stats-show-ops-per-node.json's shape):
    ``{"NodeId<k>": {"ops": [{"stats": {...}, "timestamp": ...}, ...]}, ...}``, each client's FRONTEND node's whole
    minutes (the backends' nodes do no ``ops`` here). With ``no_zeroes`` a stat that is zero or null is left out, a
    minute left with none, and a node left with no minute (our reading of the flag: nothing is shown of it);
    ``node_ids`` (``"NodeId<k>"``) limits the nodes."""
    out: dict[str, dict] = {}
    for index, nodes in systems.complete_node_minutes(minutes):
        for i in range(len(systems.node_names)):
            key = weka_client_node_id(i)
            if node_ids is not None and key not in node_ids:
                continue
            values = _stats(nodes.get(i, Minute()))
            asked = {name: values[name] for name in stats if name in values}
            if no_zeroes:
                asked = {name: v for name, v in asked.items() if v}
                if not asked:
                    continue
            out.setdefault(key, {"ops": []})["ops"].append({"stats": asked, "timestamp": _timestamp(index)})
    return out


def weka_nodes_answer(systems: Systems) -> dict:
    """The ``result`` of ``nodes_list`` (tests/fixtures/weka/nodes-list.json's fields): per node id its
    ``hostname`` and ``roles``."""
    out = {f"NodeId<{nid}>": {"hostname": host, "roles": [role]}
           for host, nodes in WEKA_BACKENDS.items() for nid, role in nodes}
    out.update({weka_client_node_id(i): {"hostname": name, "roles": ["FRONTEND"]}
                for i, name in enumerate(systems.node_names)})
    return out


def weka_hosts_answer(systems: Systems) -> dict:
    """The ``result`` of ``hosts_list`` (tests/fixtures/weka/hosts-list.json's fields): per host its ``hostname``
    and ``mode``, ``backend`` for the two backends, ``client`` for each simulated node."""
    names = [(host, "backend") for host in WEKA_BACKENDS] + [(name, "client") for name in systems.node_names]
    return {f"HostId<{i}>": {"hostname": host, "mode": mode} for i, (host, mode) in enumerate(names)}


def weka_capacity_answer(systems: Systems) -> dict:
    """The ``result`` of ``filesystems_get_capacity`` (tests/fixtures/weka/filesystems-get-capacity.json's fields):
    ``available_total`` is each file system's size, ``used_total`` grows with the checkpoints written to it."""
    out = {}
    for i, name in enumerate(WEKA_FILESYSTEMS):
        size = WEKA_SIZES[name]
        used = WEKA_USED_BASE[name] + (systems.checkpoint_bytes if name == "checkpoints" else 0)
        ssd = int(size * WEKA_SSD_SHARE)
        out[f"FSId<{i}>"] = {"name": name, "used_total": used, "available_total": size,
                             "used_ssd": min(used, ssd), "available_ssd": ssd}
    return out
