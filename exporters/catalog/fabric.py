"""Compute-fabric metrics: InfiniBand/RoCE port counters (sysfs), RoCE congestion counters
(``hw_counters``) and per-priority PFC pause frames (driver statistics)."""
from lockstep.exporters.catalog.enums import IB_PHYS_STATES, IB_PORT_STATES, numbered
from lockstep.exporters.catalog.model import counter, gauge

P = ("device", "port")
PFC = ("interface", "priority", "direction")

IB_TRANSMIT_BYTES = counter("lockstep_ib_port_transmit_bytes_total", "Data octets transmitted on the port.", P, "bytes")
IB_RECEIVE_BYTES = counter("lockstep_ib_port_receive_bytes_total", "Data octets received on the port.", P, "bytes")
IB_TRANSMIT_PACKETS = counter("lockstep_ib_port_transmit_packets_total", "Packets transmitted on the port.", P)
IB_RECEIVE_PACKETS = counter("lockstep_ib_port_receive_packets_total", "Packets received on the port.", P)
IB_TRANSMIT_WAIT = counter("lockstep_ib_port_transmit_wait_total",
                           "Ticks during which the port had data to send but no flow-control credits (port_xmit_wait).", P)
IB_SYMBOL_ERRORS = counter("lockstep_ib_port_symbol_errors_total", "Minor link errors detected on physical lanes.", P)
IB_LINK_DOWNED = counter("lockstep_ib_port_link_downed_total", "Times the link failed to recover and went down.", P)
IB_LINK_ERROR_RECOVERY = counter("lockstep_ib_port_link_error_recovery_total",
                                 "Successful link error recovery procedures.", P)
IB_RECEIVE_ERRORS = counter("lockstep_ib_port_receive_errors_total", "Received packets containing an error.", P)
IB_TRANSMIT_DISCARDS = counter("lockstep_ib_port_transmit_discards_total",
                               "Outbound packets discarded because the port was down or congested.", P)
IB_STATE = gauge("lockstep_ib_port_state", f"Logical port state: {numbered(IB_PORT_STATES)}.", P)
IB_RATE = gauge("lockstep_ib_port_rate_bytes_per_second", "Negotiated link rate.", P, "bytes_per_second")

ROCE_ECN_MARKED = counter("lockstep_roce_ecn_marked_packets_total",
                          "RoCEv2 packets received with an ECN congestion mark (np_ecn_marked_roce_packets).", P)
ROCE_CNP_SENT = counter("lockstep_roce_cnp_sent_total", "Congestion notification packets sent (np_cnp_sent).", P)
ROCE_CNP_HANDLED = counter("lockstep_roce_cnp_handled_total",
                           "Congestion notification packets handled by the reaction point (rp_cnp_handled).", P)
ROCE_OUT_OF_SEQUENCE = counter("lockstep_roce_out_of_sequence_total", "Out-of-sequence packets received.", P)
ROCE_LOCAL_ACK_TIMEOUT = counter("lockstep_roce_local_ack_timeout_errors_total",
                                 "Times the local ACK timer expired on a QP (retransmission).", P)

PFC_PAUSE_FRAMES = counter("lockstep_pfc_pause_frames_total",
                           "PFC pause frames per priority. direction: rx (received from the switch), tx (sent).", PFC)
PFC_PAUSE_DURATION = counter("lockstep_pfc_pause_duration_seconds_total",
                             "Time spent paused per priority (mlx5 reports microseconds).", PFC, "seconds")
PFC_STORM_EVENTS = counter("lockstep_pfc_pause_storm_events_total",
                           "Pause-storm watchdog events. level: warning, error (the NIC stopped honouring pauses).",
                           ("interface", "level"))

IB_PHYS_STATE = gauge("lockstep_ib_port_phys_state", f"Physical port state: {numbered(IB_PHYS_STATES)}.", P)
IB_DEVICE_INFO = gauge("lockstep_ib_device_info", "Always 1; static facts about each RDMA device (HCA).",
                       ("device", "board_id", "firmware_version", "hca_type"))
IB_PORT_INFO = gauge("lockstep_ib_port_info",
                     "Always 1; the port's link layer (InfiniBand or Ethernet, i.e. RoCE).", ("device", "port", "link_layer"))
IB_COUNTER_SATURATED = gauge(
    "lockstep_ib_port_counter_saturated",
    "1 while a legacy fixed-width PMA counter is pinned at its maximum (2^width-1) and no 64-bit counter replaces "
    "it: the counter has stopped counting, so its series is withheld instead of reporting a flat rate. "
    "Emitted only for saturated counters; counter is the sysfs file name.", ("device", "port", "counter"))
IB_LINK_DEGRADED = gauge(
    "lockstep_ib_port_link_degraded",
    "1 if the port is active below its expected rate (--infiniband.expected-rate), 0 otherwise. "
    "Only emitted for ports with an expected rate.", P)
IB_EXPECTED_RATE = gauge("lockstep_ib_port_expected_rate_bytes_per_second",
                         "Rate the port is expected to run at (--infiniband.expected-rate).", P, "bytes_per_second")
IB_RECEIVE_REMOTE_PHYSICAL_ERRORS = counter(
    "lockstep_ib_port_receive_remote_physical_errors_total",
    "Received packets marked with the EBP delimiter (an error upstream).", P)
IB_RECEIVE_SWITCH_RELAY_ERRORS = counter("lockstep_ib_port_receive_switch_relay_errors_total",
                                         "Received packets discarded because they could not be forwarded.", P)
IB_LOCAL_LINK_INTEGRITY_ERRORS = counter("lockstep_ib_port_local_link_integrity_errors_total",
                                         "Times local physical errors exceeded the link's threshold.", P)
IB_EXCESSIVE_BUFFER_OVERRUN_ERRORS = counter("lockstep_ib_port_excessive_buffer_overrun_errors_total",
                                             "Consecutive receive buffer overruns beyond the threshold.", P)
IB_VL15_DROPPED = counter("lockstep_ib_port_vl15_dropped_total",
                          "Subnet management packets (VL15) dropped for lack of buffers.", P)
IB_TRANSMIT_CONSTRAINT_ERRORS = counter("lockstep_ib_port_transmit_constraint_errors_total",
                                        "Packets not transmitted because of partition/raw-packet constraints.", P)
IB_RECEIVE_CONSTRAINT_ERRORS = counter("lockstep_ib_port_receive_constraint_errors_total",
                                       "Packets received and discarded because of partition/raw-packet constraints.", P)
RAIL_INFO = gauge(
    "lockstep_fabric_rail_info",
    "Always 1; maps an RDMA device to the network interface behind it (<sysfs>/class/infiniband/<device>/device/"
    "net/) and its rail: the index (in PCI bus order, as NVML numbers them) of the GPU under the PCIe switch the "
    "device shares, empty for a device next to no GPU (storage, in-band NICs); where no device shares a switch "
    "with a GPU, the device's ordinal by PCI address. interface is empty for a device without a netdev.",
    ("device", "interface", "rail"))

ROCE_CNP_IGNORED = counter("lockstep_roce_cnp_ignored_total",
                           "Congestion notification packets received and ignored by the reaction point (rp_cnp_ignored).",
                           P)
ROCE_PACKET_SEQUENCE_ERRORS = counter("lockstep_roce_packet_sequence_errors_total",
                                      "NAK sequence errors received (packet_seq_err).", P)
ROCE_IMPLIED_NAK_ERRORS = counter("lockstep_roce_implied_nak_sequence_errors_total",
                                  "ACKs whose PSN implied lost packets (implied_nak_seq_err).", P)
ROCE_ICRC_ERRORS = counter("lockstep_roce_icrc_errors_total",
                           "Received RoCE packets with an invalid ICRC (rx_icrc_encapsulated).", P)
ROCE_RNR_NAK_RETRY_ERRORS = counter("lockstep_roce_rnr_nak_retry_errors_total",
                                    "Receiver-not-ready NAKs whose retries were exhausted (rnr_nak_retry_err).", P)
ROCE_OUT_OF_BUFFER = counter("lockstep_roce_out_of_buffer_total",
                             "Packets dropped for lack of a posted receive WQE (out_of_buffer).", P)
ROCE_DUPLICATE_REQUESTS = counter("lockstep_roce_duplicate_requests_total",
                                  "Duplicate requests received, i.e. the peer retransmitted (duplicate_request).", P)

PFC_PAUSE_TRANSITIONS = counter("lockstep_pfc_pause_transitions_total",
                                "Transitions between paused and unpaused per priority (mlx5 rx_prio{p}_pause_transition, "
                                "bnxt pfc_pri{p}_{rx,tx}_transitions).",
                                PFC)

METRICS = (IB_TRANSMIT_BYTES, IB_RECEIVE_BYTES, IB_TRANSMIT_PACKETS, IB_RECEIVE_PACKETS, IB_TRANSMIT_WAIT,
           IB_SYMBOL_ERRORS, IB_LINK_DOWNED, IB_LINK_ERROR_RECOVERY, IB_RECEIVE_ERRORS, IB_TRANSMIT_DISCARDS,
           IB_STATE, IB_RATE, ROCE_ECN_MARKED, ROCE_CNP_SENT, ROCE_CNP_HANDLED, ROCE_OUT_OF_SEQUENCE,
           ROCE_LOCAL_ACK_TIMEOUT, PFC_PAUSE_FRAMES, PFC_PAUSE_DURATION, PFC_STORM_EVENTS,
           IB_PHYS_STATE, IB_DEVICE_INFO, IB_PORT_INFO, IB_COUNTER_SATURATED, IB_LINK_DEGRADED, IB_EXPECTED_RATE,
           IB_RECEIVE_REMOTE_PHYSICAL_ERRORS, IB_RECEIVE_SWITCH_RELAY_ERRORS, IB_LOCAL_LINK_INTEGRITY_ERRORS,
           IB_EXCESSIVE_BUFFER_OVERRUN_ERRORS, IB_VL15_DROPPED, IB_TRANSMIT_CONSTRAINT_ERRORS,
           IB_RECEIVE_CONSTRAINT_ERRORS, RAIL_INFO, ROCE_CNP_IGNORED, ROCE_PACKET_SEQUENCE_ERRORS,
           ROCE_IMPLIED_NAK_ERRORS, ROCE_ICRC_ERRORS, ROCE_RNR_NAK_RETRY_ERRORS, ROCE_OUT_OF_BUFFER,
           ROCE_DUPLICATE_REQUESTS, PFC_PAUSE_TRANSITIONS)
