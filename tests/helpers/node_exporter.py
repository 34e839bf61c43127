"""Debian's node_exporter (its infiniband collector) and the lockstep exporter on the same sysfs tree: both
scraped, and every value both expose compared after unit conversion."""
from __future__ import annotations

import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from lockstep import stack as _stack

# node_exporter name (without node_infiniband_) -> lockstep name. Both sides already count octets
# (node_exporter multiplies the 4-octet word counters by 4, as lockstep does).
PAIRS = {
    "excessive_buffer_overrun_errors_total": "lockstep_ib_port_excessive_buffer_overrun_errors_total",
    "link_downed_total": "lockstep_ib_port_link_downed_total",
    "link_error_recovery_total": "lockstep_ib_port_link_error_recovery_total",
    "local_link_integrity_errors_total": "lockstep_ib_port_local_link_integrity_errors_total",
    "port_constraint_errors_received_total": "lockstep_ib_port_receive_constraint_errors_total",
    "port_constraint_errors_transmitted_total": "lockstep_ib_port_transmit_constraint_errors_total",
    "port_data_received_bytes_total": "lockstep_ib_port_receive_bytes_total",
    "port_data_transmitted_bytes_total": "lockstep_ib_port_transmit_bytes_total",
    "port_discards_transmitted_total": "lockstep_ib_port_transmit_discards_total",
    "port_errors_received_total": "lockstep_ib_port_receive_errors_total",
    "port_packets_received_total": "lockstep_ib_port_receive_packets_total",
    "port_packets_transmitted_total": "lockstep_ib_port_transmit_packets_total",
    "port_receive_remote_physical_errors_total": "lockstep_ib_port_receive_remote_physical_errors_total",
    "port_receive_switch_relay_errors_total": "lockstep_ib_port_receive_switch_relay_errors_total",
    "port_transmit_wait_total": "lockstep_ib_port_transmit_wait_total",
    "symbol_error_total": "lockstep_ib_port_symbol_errors_total",
    "vl15_dropped_total": "lockstep_ib_port_vl15_dropped_total",
    "state_id": "lockstep_ib_port_state",
    "physical_state_id": "lockstep_ib_port_phys_state",
    "rate_bytes_per_second": "lockstep_ib_port_rate_bytes_per_second",
}
# counters_ext/ (pre-4.5 kernels): node_exporter reports them beside the 32-bit ones as legacy_*;
# lockstep reports the 64-bit value under the normal name instead of the 32-bit one.
LEGACY = {"legacy_data_received_bytes_total": "port_data_received_bytes_total",
          "legacy_data_transmitted_bytes_total": "port_data_transmitted_bytes_total",
          "legacy_packets_received_total": "port_packets_received_total",
          "legacy_packets_transmitted_total": "port_packets_transmitted_total"}
# node_exporter families lockstep deliberately leaves out (they duplicate the packet totals).
NOT_MAPPED = {"unicast_packets_received_total", "unicast_packets_transmitted_total",
              "multicast_packets_received_total", "multicast_packets_transmitted_total",
              "legacy_unicast_packets_received_total", "legacy_unicast_packets_transmitted_total",
              "legacy_multicast_packets_received_total", "legacy_multicast_packets_transmitted_total"}


def samples(text: str, prefix: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(prefix):
                out[(s.name[len(prefix):], tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape_both(tree: Path, tmp_path: Path) -> tuple[dict, dict]:
    with _stack.Stack() as st:
        node = st.add(_stack.start_node_exporter(
            ["--collector.disable-defaults", "--collector.infiniband", f"--path.sysfs={tree}"], tmp_path / "ne"))
        ours = st.add(_stack.start_on_port("lockstep", lambda port: [
            sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults", "--collector.infiniband", f"--path.sysfs={tree}"],
            tmp_path / "lockstep", ready_path="/metrics"))
        ne_text = _stack.http_get(node.url + "/metrics")[1].decode()
        ls_text = _stack.http_get(ours.url + "/metrics")[1].decode()
    assert 'node_scrape_collector_success{collector="infiniband"} 1' in ne_text, ne_text[-2000:]
    return samples(ne_text, "node_infiniband_"), samples(ls_text, "")


def assert_agree(node: dict, ours: dict, saturated_tree: bool = False) -> None:
    unknown = {name for name, _ in node} - set(PAIRS) - set(LEGACY) - NOT_MAPPED - {"info"}
    assert not unknown, f"node_exporter families with no mapping decided: {unknown}"
    replaced = {(LEGACY[name], labels) for name, labels in node if name in LEGACY}
    compared, disagreements = 0, []
    for (name, labels), value in node.items():
        target = PAIRS.get(LEGACY.get(name, name))
        if target is None or (name in PAIRS and (name, labels) in replaced):
            continue
        mine = ours.get((target, labels))
        if mine is None:
            continue  # withheld on purpose (saturated) or absent: checked below
        compared += 1
        if mine != value:
            disagreements.append(f"{name}{dict(labels)}: node_exporter {value} lockstep {mine}")
    assert not disagreements, "\n".join(disagreements)
    assert compared >= 30
    # whatever node_exporter has that lockstep lacks must be a saturated (pinned) counter
    missing = [(name, labels) for (name, labels) in node
               if name in PAIRS and (name, labels) not in replaced and (PAIRS[name], labels) not in ours]
    saturated = {dict(labels)["counter"] for (name, labels) in ours if name == "lockstep_ib_port_counter_saturated"}
    assert len(missing) == len(saturated) if saturated_tree else not missing, missing
    theirs = {labels for name, labels in node if name == "info"}
    mine = {labels for name, labels in ours if name == "lockstep_ib_device_info"}
    assert theirs == mine and mine  # board id, firmware and HCA type of every device
