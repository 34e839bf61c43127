"""``DIR/<node>/sys/class/infiniband/mlx5_<i>/...`` in the shape mlx5 sysfs has (compare
fixtures/sysfs/class/infiniband/mlx5_0): ``ports/1/{counters,hw_counters}/`` (one file per row of
``signals.PORT``), ``state`` ("4: ACTIVE"), ``phys_state`` ("5: LinkUp"), ``rate`` ("400 Gb/sec
(4X NDR)"), ``link_layer`` and ``device/net/<iface>/`` tying the HCA to its RoCE netdev. Data
counters are in 4-octet words."""
from __future__ import annotations

import os

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator.signals import PORT
from lockstep.simulator.state import State
from lockstep.simulator.topology import NIC_BUS, Topology
from lockstep.simulator.tree.files import TreeWriter

STATE = {False: b"4: ACTIVE\n", True: b"1: DOWN\n"}
PHYS = {False: b"5: LinkUp\n", True: b"2: Polling\n"}


def hca_dir(node: SimNode, gpu: int) -> str:
    return os.path.join(node.sysfs, "class", "infiniband", Topology.hca(gpu))


def write_static(w: TreeWriter, topo: Topology, node: SimNode, node_index: int) -> None:
    for gpu in range(topo.gpus_per_node):
        d = hca_dir(node, gpu)
        guid = f"{0xb83fd2030000 + node_index * 16 + gpu:016x}"
        files = {
            "board_id": "MT_0000000838", "fw_ver": "28.39.1002", "hca_type": "MT4129", "node_type": "1: CA",
            "node_guid": ":".join(guid[i:i + 4] for i in range(0, 16, 4)), "node_desc": f"{node.name} mlx5_{gpu}",
            "ports/1/rate": "400 Gb/sec (4X NDR)", "ports/1/link_layer": "Ethernet", "ports/1/lid": "0x0",
        }
        for name, text in files.items():
            w.put(os.path.join(d, name), f"{text}\n".encode())
        net = os.path.join(d, "device", "net", topo.iface(gpu))
        mac = f"b8:3f:d2:{node_index:02x}:{NIC_BUS[gpu % 8]:02x}:{gpu:02x}"
        w.put(os.path.join(net, "address"), f"{mac}\n".encode())
        w.put(os.path.join(net, "mtu"), b"4200\n")


def write_counters(w: TreeWriter, topo: Topology, node: SimNode, node_index: int, s: State) -> None:
    base = node_index * topo.gpus_per_node
    counters = [(signal.field, signal.raw(s)) for signal in PORT]
    for gpu in range(topo.gpus_per_node):
        g = base + gpu
        hca = hca_dir(node, gpu)
        port = os.path.join(hca, "ports", "1")
        down = bool(s.port_down[g])
        # link state text changes length: replaced atomically; counters are rewritten in place
        w.put(os.path.join(port, "state"), STATE[down])
        w.put(os.path.join(port, "phys_state"), PHYS[down])
        w.put(os.path.join(hca, "device", "net", topo.iface(gpu), "operstate"), b"down\n" if down else b"up\n")
        for field, values in counters:
            w.attr(os.path.join(port, field), b"%d\n" % values[g])
