"""``DIR/<node>/gpu-jobs/<gpu index>`` and ``DIR/<node>/gpu-jobs-users/<job id>``: what the Slurm
prolog in deploy/slurm/ writes on a real node when the job starts (dcgm-exporter's
``--hpc-job-mapping-dir`` layout), read by the ``jobs`` collector as ``lockstep_gpu_job_info``."""
from __future__ import annotations

import os

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator.topology import Topology
from lockstep.simulator.tree.files import TreeWriter

USER = "sim"


def write(w: TreeWriter, topo: Topology, node: SimNode, node_index: int, job_id: str) -> None:
    """Written once, at start: the job holds every GPU of its nodes for the whole run."""
    if not topo.job_nodes[node_index]:
        return
    for gpu in range(topo.gpus_per_node):
        w.put(os.path.join(node.job_mapping, str(gpu)), f"{job_id}\n".encode())
    if "/" not in job_id:   # a <namespace>/<name> id is no file name (and a Kubernetes job has no Slurm user)
        w.put(os.path.join(node.job_users, job_id), f"{USER}\n".encode())
