"""``DIR/<node>/gpus.json``: the NVML-shaped GPU state the GPU collector's ``sim`` backend reads
(format in simulator/FORMATS.md; values in NVML's own units): the fields of ``signals.GPU`` at their
key paths, around the GPU's identity and the fields the simulator holds constant."""
from __future__ import annotations

import json
import os

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator import hardware as hw
from lockstep.simulator.signals import GPU
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology
from lockstep.simulator.tree.files import TreeWriter

DRIVER, CUDA = hw.DRIVER_VERSION, 12040
_FIELDS = tuple((signal, tuple(signal.field.split("."))) for signal in GPU)


def gpu_doc(topo: Topology, s: State, g: int) -> dict:
    i = int(topo.gpu_index[g])
    peers = {str(p): "ok" for p in range(topo.gpus_per_node) if p != i}
    doc = {  # None: a field of signals.GPU, filled in below (a new one is added at the end of its parent)
        "index": i, "uuid": str(topo.identity["uuid"][g]), "name": hw.GPU_NAME,
        "serial": str(topo.identity["serial"][g]), "pci_bus_id": topo.pci_bus_id(i), "lost": bool(s.lost[g]),
        "utilization": {"gpu": None, "memory": None},
        "prof": {"sm_active": None, "sm_occupancy": None, "tensor_active": None, "dram_active": None},
        "clocks_mhz": {"sm": None, "mem": hw.MEM_MHZ}, "max_clocks_mhz": {"sm": None, "mem": hw.MEM_MHZ},
        "power_mw": None, "power_limit_mw": None, "energy_mj": None, "temperature_c": None,
        "memory_temperature_c": None, "memory": {"used": None, "total": hw.MEMORY_TOTAL},
        "clock_event_reasons": None, "ecc_mode": 1,
        "ecc": {"corrected": 0, "uncorrected": int(s.memory["ecc_uncorrected"][g])},
        "remapped_rows": {"correctable": 0, "uncorrectable": int(s.memory["remap_uncorrectable"][g]),
                          "pending": bool(s.memory["remap_pending"][g]), "failed": bool(s.memory["remap_failed"][g])},
        "pcie": {"replay": 0, "width": 16, "max_width": 16, "gen": 5, "max_gen": 5},
        "nvlink": [{"link": n, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0} for n in range(18)],
        "persistence_mode": 1, "p2p": peers,
        "xid_events": [{"seq": seq, "xid": xid, "timestamp": ts} for seq, gg, xid, ts in s.xid_events if gg == g],
    }
    for signal, path in _FIELDS:
        parent = doc
        for key in path[:-1]:
            parent = parent.setdefault(key, {})
        parent[path[-1]] = signal.raw(s)[g].item()
    doc["prof"]["sm_occupancy"] = round(doc["prof"]["sm_active"] * 0.5, 4)
    return doc


def document(topo: Topology, s: State, node_index: int) -> dict:
    """The node's GPUs as NVML enumerates them: a missing GPU (gpu_missing) is not listed and the ones
    after it move down an index, as NVML numbers the GPUs it finds."""
    base = node_index * topo.gpus_per_node
    present = [base + i for i in range(topo.gpus_per_node) if not s.missing[base + i]]
    gpus = [dict(gpu_doc(topo, s, g), index=index) for index, g in enumerate(present)]
    return {"version": 1, "timestamp": s.timestamp, "driver_version": DRIVER, "cuda_driver_version": CUDA,
            "gpus": gpus}


def write(w: TreeWriter, topo: Topology, node: SimNode, node_index: int, s: State) -> None:
    w.put(os.fspath(node.gpus), json.dumps(document(topo, s, node_index), separators=(",", ":")).encode())
