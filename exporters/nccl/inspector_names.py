"""NCCL Inspector's own metric names and labels (``--nccl-inspector.metric-names=nccl``), so NCCL's Grafana template
(``plugins/profiler/inspector/grafana/`` in NVIDIA/nccl) works on a node running lockstep.

Names and units are NCCL's (GB/s, microseconds). Each family's labels are the union of what 2.29 and 2.30 write,
less 2.29's ``coll_sn`` and ``timestamp`` (a new series every rewrite), plus lockstep's ``job_id`` and ``uuid``; a
label the writing release lacks is empty, which Prometheus drops, so a series keeps the labels NCCL gave it. NCCL's
``node`` label meets the scrape target's ``node`` in Prometheus and becomes ``exported_node`` unless the scrape
honours labels. Not catalog names: ``Metric(foreign=True)``.
"""
from __future__ import annotations

from lockstep.exporters.catalog.model import GAUGE, Metric
from lockstep.exporters.nccl import inspector as fmt

OURS = ("job_id", "uuid")
COLLECTIVE_LABELS = OURS + ("version", "slurm_job_id", "node", "gpu", "comm_name", "n_nodes", "nranks", "collective",
                            "message_size", "algo_proto", "comm_id", "hostname", "rank", "slurm_job", "gpu_device_id")
P2P_LABELS = OURS + ("version", "slurm_job_id", "node", "gpu", "comm_name", "n_nodes", "nranks", "p2p_operation",
                     "message_size")

_HELP = {
    fmt.ALGORITHM_BW: "NCCL algorithm bandwidth in GB/s (NCCL 2.29)",
    fmt.BUS_BW: "NCCL bus bandwidth in GB/s (collectives)",
    fmt.EXEC_TIME: "Execution time in microseconds (collectives)",
    fmt.P2P_BUS_BW: "NCCL P2P bus bandwidth in GB/s",
    fmt.P2P_EXEC_TIME: "P2P execution time in microseconds",
}
METRICS = {name: Metric(name, GAUGE, help, COLLECTIVE_LABELS if fmt.FAMILIES[name] == fmt.COLLECTIVE else P2P_LABELS,
                        foreign=True)
           for name, help in _HELP.items()}
