"""``DIR/<node>/ethtool/<iface>/statistics``: ``ethtool -S <iface>`` text with mlx5 counter names
(kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst). Per-priority
pause counters (``signals.PFC``) appear only for priorities with PFC enabled; pause durations are
microseconds. The NIC's traffic counters are its rail port's (``signals.PORT``), in bytes."""
from __future__ import annotations

import os

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator.signals import PFC, STORM, WORDS
from lockstep.simulator.state import State
from lockstep.simulator.topology import BASE_PRIORITY, Topology
from lockstep.simulator.tree.files import TreeWriter

DIRECTIONS = ("rx", "tx")
_PFC = {d: tuple(signal for signal in PFC if signal.label("direction") == d) for d in DIRECTIONS}


def statistics(topo: Topology, s: State, g: int) -> bytes:
    def port(name):
        return int(s.port[name][g])
    rx_b, tx_b = WORDS(port("port_rcv_data")), WORDS(port("port_xmit_data"))
    rx_p, tx_p = port("port_rcv_packets"), port("port_xmit_packets")
    rows = [("rx_packets", 0), ("tx_packets", 0), ("rx_bytes", 0), ("tx_bytes", 0),
            ("rx_vport_rdma_unicast_packets", rx_p), ("rx_vport_rdma_unicast_bytes", rx_b),
            ("tx_vport_rdma_unicast_packets", tx_p), ("tx_vport_rdma_unicast_bytes", tx_b),
            ("rx_out_of_buffer", 0),
            ("rx_packets_phy", rx_p), ("tx_packets_phy", tx_p), ("rx_bytes_phy", rx_b), ("tx_bytes_phy", tx_b),
            ("rx_discards_phy", 0), ("tx_discards_phy", port("port_xmit_discards")),
            ("rx_crc_errors_phy", 0), ("rx_symbol_err_phy", port("symbol_error")),
            ("link_down_events_phy", port("link_downed")),
            ("rx_pause_ctrl_phy", 0), ("tx_pause_ctrl_phy", 0)]
    for p in range(8):
        data = p == BASE_PRIORITY
        rows += [(f"rx_prio{p}_bytes", rx_b if data else 0), (f"rx_prio{p}_packets", rx_p if data else 0),
                 (f"tx_prio{p}_bytes", tx_b if data else 0), (f"tx_prio{p}_packets", tx_p if data else 0)]
        if p in topo.pfc_priorities:
            rows += _pause_rows(s, g, p, topo.pfc_priorities.index(p))
    rows += [(signal.field, int(signal.raw(s)[g])) for signal in STORM]
    return ("NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in rows)).encode()


def _pause_rows(s: State, g: int, priority: int, column: int) -> list[tuple[str, int]]:
    rows = []
    for d in DIRECTIONS:
        rows += [(signal.field.format(priority=priority), int(signal.raw(s)[g, column])) for signal in _PFC[d]]
        # then mlx5's count of Xoff→Xon transitions: one per two pause frames here
        rows.append((f"{d}_prio{priority}_pause_transition", (int(s.pfc[f"{d}_pause"][g, column]) + 1) // 2))
    return rows


def write(w: TreeWriter, topo: Topology, node: SimNode, node_index: int, s: State, first: bool) -> None:
    for gpu in range(topo.gpus_per_node):
        d = os.path.join(node.ethtool, topo.iface(gpu))
        if first:
            w.put(os.path.join(d, "driver"), b"mlx5_core\n")
        w.put(os.path.join(d, "statistics"), statistics(topo, s, node_index * topo.gpus_per_node + gpu))
