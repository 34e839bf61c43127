"""The fabric exporter's metrics (``lockstep fabric-exporter``): every switch and HCA port of an
InfiniBand subnet as ``ibnetdiscover`` and ``perfquery`` see it from a management host, the sweep that
read them, and each link's health verdict. Ports are keyed by node GUID and port number; names and the
link partner are on ``lockstep_fabric_port_info`` (join on ``guid, port``)."""
from lockstep.exporters.catalog.enums import LINK_HEALTH_STATES
from lockstep.exporters.catalog.model import counter, gauge

P = ("guid", "port")
NODE = ("guid", "kind", "name")


def _c(short: str, help: str, unit: str = ""):
    return counter(f"lockstep_fabric_port_{short}_total", f"{help} (perfquery -x).", P, unit)


PORT_INFO = gauge(
    "lockstep_fabric_port_info",
    "Always 1; a port of the subnet as ibnetdiscover -p lists it: its node (kind switch|ca|router, node description, "
    "LID), active width (lanes) and speed, and the link partner on the other end (remote_* empty for a port with "
    "none).",
    ("guid", "port", "kind", "name", "lid", "width", "speed", "remote_kind", "remote_guid", "remote_port",
     "remote_name"))
PORT_RATE = gauge("lockstep_fabric_port_rate_bytes_per_second",
                  "Nominal signalling rate of the active link (width × lane rate of its speed).", P, "bytes_per_second")
PORT_EXPECTED_RATE = gauge(
    "lockstep_fabric_port_expected_rate_bytes_per_second",
    "The rate this port should run at (--link.expected-width and --link.expected-speed); only with them set.",
    P, "bytes_per_second")
TRANSMIT_BYTES = _c("transmit_bytes", "Data octets transmitted (PortXmitData counts 4-octet words)", "bytes")
RECEIVE_BYTES = _c("receive_bytes", "Data octets received (PortRcvData counts 4-octet words)", "bytes")
TRANSMIT_PACKETS = _c("transmit_packets", "Packets transmitted (PortXmitPkts)")
RECEIVE_PACKETS = _c("receive_packets", "Packets received (PortRcvPkts)")
TRANSMIT_WAIT = _c("transmit_wait", "Ticks with data to send but no flow-control credits (PortXmitWait)")
SYMBOL_ERRORS = _c("symbol_errors", "Minor link errors detected on physical lanes (SymbolErrorCounter)")
LINK_ERROR_RECOVERY = _c("link_error_recovery", "Successful link error recoveries (LinkErrorRecoveryCounter)")
LINK_DOWNED = _c("link_downed", "Times the link failed to recover and went down (LinkDownedCounter)")
RECEIVE_ERRORS = _c("receive_errors", "Received packets containing an error (PortRcvErrors)")
RECEIVE_REMOTE_PHYSICAL_ERRORS = _c("receive_remote_physical_errors",
                                    "Received packets marked bad upstream (PortRcvRemotePhysicalErrors)")
RECEIVE_SWITCH_RELAY_ERRORS = _c("receive_switch_relay_errors",
                                 "Received packets that could not be forwarded (PortRcvSwitchRelayErrors)")
TRANSMIT_DISCARDS = _c("transmit_discards", "Outbound packets discarded (PortXmitDiscards)")
TRANSMIT_CONSTRAINT_ERRORS = _c("transmit_constraint_errors", "Packets not sent for constraints (PortXmitConstraintErrors)")
RECEIVE_CONSTRAINT_ERRORS = _c("receive_constraint_errors", "Packets dropped for constraints (PortRcvConstraintErrors)")
LOCAL_LINK_INTEGRITY_ERRORS = _c("local_link_integrity_errors",
                                 "Times local physical errors exceeded the threshold (LocalLinkIntegrityErrors)")
EXCESSIVE_BUFFER_OVERRUN_ERRORS = _c("excessive_buffer_overrun_errors",
                                     "Consecutive receive buffer overruns past the threshold (ExcessiveBufferOverrunErrors)")
VL15_DROPPED = _c("vl15_dropped", "Subnet management packets dropped (VL15Dropped)")

NODE_UP = gauge("lockstep_fabric_node_up",
                "1 if the node's perfquery answered in the last complete sweep, 0 if it failed or timed out.", NODE)
NODE_QUERY_DURATION = gauge("lockstep_fabric_node_query_duration_seconds",
                            "Wall-clock time of the node's perfquery in the last complete sweep.", ("guid",), "seconds")
NODE_QUERY_FAILURES = counter(
    "lockstep_fabric_node_query_failures_total",
    "Failed perfquery runs of the node since the exporter started. reason: timeout (past --sweep.node-timeout), "
    "failed (non-zero exit), unreadable (output that is not perfquery's).", ("guid", "reason"))
SWEEP_SUCCESS = gauge("lockstep_fabric_sweep_success",
                      "1 if the last sweep discovered the subnet, 0 if discovery failed (the older sweep is served).")
SWEEP_AGE = gauge("lockstep_fabric_sweep_age_seconds", "Seconds since the served (last complete) sweep ended.",
                  unit="seconds")
SWEEP_DURATION = gauge("lockstep_fabric_sweep_duration_seconds", "Wall-clock time the served sweep took.",
                       unit="seconds")
SWEEP_TIMESTAMP = gauge("lockstep_fabric_sweep_timestamp_seconds", "Unix time the served sweep ended.",
                        unit="seconds")
SWEEP_PORTS = gauge("lockstep_fabric_sweep_ports", "Ports ibnetdiscover listed in the served sweep.")
SWEEP_UNREADABLE_LINES = gauge("lockstep_fabric_sweep_unreadable_lines",
                               "Lines of the served sweep's ibnetdiscover output that did not read as a port.")
SWEEPS = counter("lockstep_fabric_sweeps_total",
                 "Sweeps since the exporter started. result: complete, failed (discovery failed), no_infiniband "
                 "(the host has no usable InfiniBand port: no HCA, or RoCE only).", ("result",))
INFINIBAND_PRESENT = gauge(
    "lockstep_fabric_infiniband_present",
    "0 while the tools report no usable InfiniBand port on this host (a RoCE-only or HCA-less host), else 1.")
LINK_HEALTH = gauge(
    "lockstep_link_health",
    f"1 for the link's current verdict, 0 for the others; state: {', '.join(LINK_HEALTH_STATES)}. Computed by the "
    "fabric exporter from its own sweeps (docs/architecture.md, \"Link health\").", ("guid", "port", "state"))
LINK_HEALTH_REASON = gauge(
    "lockstep_link_health_reason",
    "Always 1; each rule that holds a port away from ok. reason: symbol_ber_12m, symbol_ber_125m, link_downed, "
    "link_error_recovery, excessive_buffer_overrun, local_link_integrity, rate_below_expected, partner_link_downed.",
    ("guid", "port", "reason"))

COUNTERS = {
    "PortXmitData": TRANSMIT_BYTES, "PortRcvData": RECEIVE_BYTES, "PortXmitPkts": TRANSMIT_PACKETS,
    "PortRcvPkts": RECEIVE_PACKETS, "PortXmitWait": TRANSMIT_WAIT, "SymbolErrorCounter": SYMBOL_ERRORS,
    "LinkErrorRecoveryCounter": LINK_ERROR_RECOVERY, "LinkDownedCounter": LINK_DOWNED, "PortRcvErrors": RECEIVE_ERRORS,
    "PortRcvRemotePhysicalErrors": RECEIVE_REMOTE_PHYSICAL_ERRORS,
    "PortRcvSwitchRelayErrors": RECEIVE_SWITCH_RELAY_ERRORS, "PortXmitDiscards": TRANSMIT_DISCARDS,
    "PortXmitConstraintErrors": TRANSMIT_CONSTRAINT_ERRORS, "PortRcvConstraintErrors": RECEIVE_CONSTRAINT_ERRORS,
    "LocalLinkIntegrityErrors": LOCAL_LINK_INTEGRITY_ERRORS,
    "ExcessiveBufferOverrunErrors": EXCESSIVE_BUFFER_OVERRUN_ERRORS, "VL15Dropped": VL15_DROPPED,
}

METRICS = (PORT_INFO, PORT_RATE, PORT_EXPECTED_RATE, *COUNTERS.values(), NODE_UP, NODE_QUERY_DURATION,
           NODE_QUERY_FAILURES, SWEEP_SUCCESS, SWEEP_AGE, SWEEP_DURATION, SWEEP_TIMESTAMP, SWEEP_PORTS,
           SWEEP_UNREADABLE_LINES, SWEEPS, INFINIBAND_PRESENT, LINK_HEALTH, LINK_HEALTH_REASON)
