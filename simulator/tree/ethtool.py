"""``DIR/<node>/ethtool/<iface>/statistics``: ``ethtool -S <iface>`` text with mlx5 counter names
(kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst). Per-priority
pause counters appear only for priorities with PFC enabled; pause durations are microseconds."""
from __future__ import annotations

import os

from simulator.model import State
from simulator.topology import BASE_PRIORITY, Topology
from simulator.tree.files import TreeWriter


def statistics(topo: Topology, s: State, g: int) -> bytes:
    rx_b, tx_b = int(s.port["port_rcv_data"][g]) * 4, int(s.port["port_xmit_data"][g]) * 4
    rx_p, tx_p = int(s.port["port_rcv_packets"][g]), int(s.port["port_xmit_packets"][g])
    rows = [("rx_packets", 0), ("tx_packets", 0), ("rx_bytes", 0), ("tx_bytes", 0),
            ("rx_vport_rdma_unicast_packets", rx_p), ("rx_vport_rdma_unicast_bytes", rx_b),
            ("tx_vport_rdma_unicast_packets", tx_p), ("tx_vport_rdma_unicast_bytes", tx_b),
            ("rx_out_of_buffer", 0),
            ("rx_packets_phy", rx_p), ("tx_packets_phy", tx_p), ("rx_bytes_phy", rx_b), ("tx_bytes_phy", tx_b),
            ("rx_discards_phy", 0), ("tx_discards_phy", int(s.port["port_xmit_discards"][g])),
            ("rx_crc_errors_phy", 0), ("rx_symbol_err_phy", int(s.port["symbol_error"][g])),
            ("link_down_events_phy", int(s.port["link_downed"][g])),
            ("rx_pause_ctrl_phy", 0), ("tx_pause_ctrl_phy", 0)]
    for p in range(8):
        data = p == BASE_PRIORITY
        rows += [(f"rx_prio{p}_bytes", rx_b if data else 0), (f"rx_prio{p}_packets", rx_p if data else 0),
                 (f"tx_prio{p}_bytes", tx_b if data else 0), (f"tx_prio{p}_packets", tx_p if data else 0)]
        if p in topo.pfc_priorities:
            i = topo.pfc_priorities.index(p)
            for d in ("rx", "tx"):
                pauses = int(s.pfc[f"{d}_pause"][g, i])
                rows += [(f"{d}_prio{p}_pause", pauses), (f"{d}_prio{p}_pause_duration", int(s.pfc[f"{d}_pause_duration"][g, i])),
                         (f"{d}_prio{p}_pause_transition", (pauses + 1) // 2)]
    rows += [("tx_pause_storm_warning_events", int(s.storm["warning"][g])),
             ("tx_pause_storm_error_events", int(s.storm["error"][g]))]
    return ("NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in rows)).encode()


def write(w: TreeWriter, topo: Topology, root: str, node_index: int, s: State, first: bool) -> None:
    node = topo.nodes[node_index]
    for gpu in range(topo.gpus_per_node):
        d = os.path.join(root, node, "ethtool", topo.iface(gpu))
        if first:
            w.put(os.path.join(d, "driver"), b"mlx5_core\n")
        w.put(os.path.join(d, "statistics"), statistics(topo, s, node_index * topo.gpus_per_node + gpu))


