"""``DIR/<node>/gpus.json``: the NVML-shaped GPU state the GPU collector's ``sim`` backend reads
(format in simulator/FORMATS.md; values in NVML's own units)."""
from __future__ import annotations

import json
import os

from simulator import hardware as hw
from simulator.model import State
from simulator.topology import Topology
from simulator.tree.files import TreeWriter

DRIVER, CUDA = "550.90.07", 12040


def gpu_doc(topo: Topology, s: State, g: int) -> dict:
    gpu, i = s.gpu, int(topo.gpu_index[g])
    peers = {str(p): "ok" for p in range(topo.gpus_per_node) if p != i}
    return {
        "index": i, "uuid": str(topo.identity["uuid"][g]), "name": "NVIDIA H100 80GB HBM3",
        "serial": str(topo.identity["serial"][g]), "pci_bus_id": topo.pci_bus_id(i), "lost": bool(s.lost[g]),
        "utilization": {"gpu": int(gpu["util"][g]), "memory": int(gpu["mem_util"][g])},
        "prof": {"sm_active": float(gpu["sm_active"][g]), "sm_occupancy": round(float(gpu["sm_active"][g]) * 0.5, 4),
                 "tensor_active": float(gpu["tensor_active"][g]), "dram_active": float(gpu["dram_active"][g])},
        "clocks_mhz": {"sm": int(gpu["clock_sm"][g]), "mem": hw.MEM_MHZ},
        "max_clocks_mhz": {"sm": hw.MAX_SM_MHZ, "mem": hw.MEM_MHZ},
        "power_mw": int(gpu["power_mw"][g]), "power_limit_mw": int(hw.POWER_LIMIT_W * 1000),
        "energy_mj": int(s.energy_mj[g]), "temperature_c": int(gpu["temp"][g]),
        "memory_temperature_c": int(gpu["mem_temp"][g]),
        "memory": {"used": int(gpu["mem_used"][g]), "total": hw.MEMORY_TOTAL},
        "clock_event_reasons": int(gpu["reasons"][g]), "ecc_mode": 1,
        "ecc": {"corrected": 0, "uncorrected": 0},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False},
        "pcie": {"replay": 0, "width": 16, "max_width": 16, "gen": 5, "max_gen": 5},
        "nvlink": [{"link": n, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0} for n in range(18)],
        "persistence_mode": 1, "p2p": peers,
        "xid_events": [{"seq": seq, "xid": xid, "timestamp": ts} for seq, gg, xid, ts in s.xid_events if gg == g],
    }


def document(topo: Topology, s: State, node_index: int) -> dict:
    base = node_index * topo.gpus_per_node
    return {"version": 1, "timestamp": s.timestamp, "driver_version": DRIVER, "cuda_driver_version": CUDA,
            "gpus": [gpu_doc(topo, s, base + i) for i in range(topo.gpus_per_node)]}


def write(w: TreeWriter, topo: Topology, root: str, node_index: int, s: State) -> None:
    path = os.path.join(root, topo.nodes[node_index], "gpus.json")
    w.put(path, json.dumps(document(topo, s, node_index), separators=(",", ":")).encode())
