"""Compute-fabric metrics: InfiniBand/RoCE port counters (sysfs), RoCE congestion counters
(``hw_counters``) and per-priority PFC pause frames (driver statistics)."""
from exporters.catalog.model import counter, gauge

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
IB_STATE = gauge("lockstep_ib_port_state",
                 "Logical port state: 1 down, 2 init, 3 armed, 4 active, 5 active_defer.", P)
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

METRICS = (IB_TRANSMIT_BYTES, IB_RECEIVE_BYTES, IB_TRANSMIT_PACKETS, IB_RECEIVE_PACKETS, IB_TRANSMIT_WAIT,
           IB_SYMBOL_ERRORS, IB_LINK_DOWNED, IB_LINK_ERROR_RECOVERY, IB_RECEIVE_ERRORS, IB_TRANSMIT_DISCARDS,
           IB_STATE, IB_RATE, ROCE_ECN_MARKED, ROCE_CNP_SENT, ROCE_CNP_HANDLED, ROCE_OUT_OF_SEQUENCE,
           ROCE_LOCAL_ACK_TIMEOUT, PFC_PAUSE_FRAMES, PFC_PAUSE_DURATION, PFC_STORM_EVENTS)
