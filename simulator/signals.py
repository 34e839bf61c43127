"""The one table from simulator state to metric: for every simulated quantity, where it lives in
``State`` (in the units its real source reports), the catalog metric the series frame carries it as,
the unit conversion the exporter applies on the way, its constant labels, and the field of the live
tree that holds its raw value. The file writers (``tree/``) and the series writer (``blocks``) both
read it, so the live files at tick k hold exactly the numbers of the series frame at tick k.

A new counter is one row here (plus the model's increments, if it is to move): the model allocates
its state from the table, the writer of its kind puts it in the live tree, the series carries it
when it names a metric. A row without a metric is written to the live tree only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockstep.exporters.catalog import fabric as F
from lockstep.exporters.catalog import gpu as G
from lockstep.exporters.catalog import storage as S
from lockstep.exporters.catalog.model import Metric

if TYPE_CHECKING:
    from lockstep.simulator.state import State


@dataclass(frozen=True)
class Scale:
    """A unit conversion as the exporter applies it: times ``mul``, then divided by ``div``."""

    mul: float = 1
    div: float = 1

    def __call__(self, value: Any) -> Any:
        if self.mul != 1:
            value = value * self.mul
        if self.div != 1:
            value = value / self.div
        return value


AS_IS = Scale()
PERCENT = Scale(div=100.0)   # NVML utilization is a percentage
MHZ = Scale(mul=1e6)         # NVML clocks are MHz
MILLI = Scale(div=1000.0)    # NVML power is mW, energy mJ
WORDS = Scale(mul=4)         # IB port_xmit_data / port_rcv_data count 4-octet words
MICRO = Scale(div=1e6)       # mlx5 pause duration is microseconds


@dataclass(frozen=True)
class Signal:
    group: str                   # the State attribute: gpu, energy_mj, port, pfc, storm, storage
    key: str | None              # the entry of a dict attribute (None: the attribute itself)
    metric: Metric | None        # None: in the live tree only
    scale: Scale = AS_IS
    labels: tuple[tuple[str, str], ...] = ()
    field: str = ""              # where the live tree holds it; its writer's doc says in what form

    def raw(self, state: "State") -> Any:
        """The values at ``state``, in source units (one per GPU, port, NIC or node)."""
        values = getattr(state, self.group)
        return values if self.key is None else values[self.key]

    def value(self, state: "State") -> Any:
        """The values at ``state`` in catalog base units, as the exporter reports them."""
        return self.scale(self.raw(state))

    def label(self, name: str) -> str:
        return dict(self.labels)[name]


def _gpu(key: str, metric: Metric | None, field: str, scale: Scale = AS_IS) -> Signal:
    return Signal("gpu", key, metric, scale, field=field)


# Per GPU, in NVML's units; field: the key path in the GPU's entry of gpus.json. A lost GPU's
# series are absent (its gpus.json entry keeps the last values, marked lost).
GPU = (
    _gpu("util", G.UTILIZATION, "utilization.gpu", PERCENT),
    _gpu("sm_active", G.SM_ACTIVE, "prof.sm_active"),
    _gpu("tensor_active", G.TENSOR_ACTIVE, "prof.tensor_active"),
    _gpu("clock_sm", G.SM_CLOCK, "clocks_mhz.sm", MHZ),
    _gpu("clock_sm_max", G.SM_CLOCK_MAX, "max_clocks_mhz.sm", MHZ),
    _gpu("power_mw", G.POWER, "power_mw", MILLI),
    _gpu("power_limit_mw", G.POWER_LIMIT, "power_limit_mw", MILLI),
    Signal("energy_mj", None, G.ENERGY, MILLI, field="energy_mj"),
    _gpu("temp", G.TEMPERATURE, "temperature_c"),
    _gpu("mem_temp", G.MEMORY_TEMPERATURE, "memory_temperature_c"),
    _gpu("mem_used", G.MEMORY_USED, "memory.used"),
    _gpu("mem_util", None, "utilization.memory"),
    _gpu("dram_active", None, "prof.dram_active"),
    # The series splits the bitmask into lockstep_gpu_clock_event_active{reason} (blocks.REASONS).
    _gpu("reasons", None, "clock_event_reasons"),
    _gpu("pcie_width", G.PCIE_WIDTH, "pcie.width"),
    _gpu("pcie_width_max", G.PCIE_WIDTH_MAX, "pcie.max_width"),
)


def _port(name: str, metric: Metric | None = None, scale: Scale = AS_IS, sub: str = "counters") -> Signal:
    return Signal("port", name, metric, scale, field=f"{sub}/{name}")


def _roce(name: str, metric: Metric | None = None) -> Signal:
    return _port(name, metric, sub="hw_counters")


# Per rail port (one HCA per GPU, port 1); field: the sysfs file under ports/1/.
PORT = (
    _port("port_xmit_data", F.IB_TRANSMIT_BYTES, WORDS), _port("port_rcv_data", F.IB_RECEIVE_BYTES, WORDS),
    _port("port_xmit_packets", F.IB_TRANSMIT_PACKETS), _port("port_rcv_packets", F.IB_RECEIVE_PACKETS),
    _port("unicast_xmit_packets"), _port("unicast_rcv_packets"),
    _port("multicast_xmit_packets"), _port("multicast_rcv_packets"),
    _port("port_xmit_wait", F.IB_TRANSMIT_WAIT), _port("symbol_error", F.IB_SYMBOL_ERRORS),
    _port("link_downed", F.IB_LINK_DOWNED), _port("link_error_recovery", F.IB_LINK_ERROR_RECOVERY),
    _port("port_rcv_errors", F.IB_RECEIVE_ERRORS), _port("port_xmit_discards", F.IB_TRANSMIT_DISCARDS),
    _port("port_rcv_remote_physical_errors"), _port("port_rcv_switch_relay_errors"),
    _port("local_link_integrity_errors"), _port("excessive_buffer_overrun_errors"), _port("VL15_dropped"),
    _port("port_xmit_constraint_errors"), _port("port_rcv_constraint_errors"),
    _roce("np_ecn_marked_roce_packets", F.ROCE_ECN_MARKED), _roce("np_cnp_sent", F.ROCE_CNP_SENT),
    _roce("rp_cnp_handled", F.ROCE_CNP_HANDLED), _roce("out_of_sequence", F.ROCE_OUT_OF_SEQUENCE),
    _roce("local_ack_timeout_err", F.ROCE_LOCAL_ACK_TIMEOUT),
    _roce("packet_seq_err"), _roce("roce_adp_retrans"), _roce("out_of_buffer"),
)


def _pfc(direction: str, key: str, metric: Metric, scale: Scale = AS_IS) -> Signal:
    return Signal("pfc", f"{direction}_{key}", metric, scale, (("direction", direction),),
                  f"{direction}_prio{{priority}}_{key}")


# Per NIC and PFC-enabled priority; field: the `ethtool -S` name ({priority} filled in).
PFC = tuple(signal for direction in ("rx", "tx") for signal in (
    _pfc(direction, "pause", F.PFC_PAUSE_FRAMES),
    _pfc(direction, "pause_duration", F.PFC_PAUSE_DURATION, MICRO),
))

# Per NIC: the mlx5 pause-storm watchdog; field: the `ethtool -S` name.
STORM = tuple(Signal("storm", level, F.PFC_STORM_EVENTS, labels=(("level", level),),
                     field=f"tx_pause_storm_{level}_events") for level in ("warning", "error"))

# The node's filesystems: (mount, fstype, fsname) labels.
LUSTRE = {"mount": "/lustre", "fstype": "lustre", "fsname": "scratch"}
NFS = {"mount": "/home", "fstype": "nfs4", "fsname": "10.0.0.20:/export/home"}


def _fs(mount: dict[str, str], key: str, metric: Metric | None, op: str | None = None) -> Signal:
    labels = {**mount, "op": op} if op else mount
    return Signal("storage", key, metric, labels=tuple(labels.items()))


# Per job node: the job's cgroup v2 group (tree/cgroup.py; live tree only, its job_id is the scenario's): io.stat
# of its cache device (bytes, operations) and io.pressure's stalled totals (microseconds).
JOB_IO = tuple(Signal("storage", key, None, field=key[len("job_io_"):])
               for key in ("job_io_rbytes", "job_io_wbytes", "job_io_rios", "job_io_wios", "job_io_some_us",
                           "job_io_full_us"))

# Per node: Lustre llite stats, NFS mountstats and (nvme_*, the data loader's local NVMe cache)
# diskstats, whose writers in tree/procfs.py place each value; a Lustre metadata op's stats line is
# named by its ``op``.
STORAGE = (
    _fs(LUSTRE, "lustre_read_bytes", S.READ_BYTES), _fs(LUSTRE, "lustre_write_bytes", S.WRITE_BYTES),
    *(_fs(LUSTRE, f"lustre_{op}", S.METADATA_OPS, op) for op in ("open", "close", "getattr", "statfs")),
    _fs(NFS, "nfs_read_bytes", S.READ_BYTES), _fs(NFS, "nfs_write_bytes", S.WRITE_BYTES),
    *(_fs(NFS, f"nfs_{op.upper()}", S.METADATA_OPS, op) for op in ("open", "close", "getattr", "access")),
    _fs(LUSTRE, "lustre_read_samples", None), _fs(LUSTRE, "lustre_write_samples", None),
    _fs(LUSTRE, "lustre_ckpt_bytes", None),   # no file: what the storage systems take (simulator/storagesys.py)
    _fs(NFS, "nfs_READ", None), _fs(NFS, "nfs_WRITE", None),
    *(Signal("storage", key, None) for key in ("nvme_reads", "nvme_read_sectors", "nvme_read_ms", "nvme_writes",
                                               "nvme_write_sectors", "nvme_write_ms", "nvme_io_ms")),
    *JOB_IO,
)
