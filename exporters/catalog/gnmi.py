"""Switch-side PFC, ECN, queue and PFC-watchdog metrics from the switch exporter (``lockstep switch-exporter``),
subscribed over gNMI. Each HELP names the source path of both path sets (exporters/gnmi/paths.py):
SONiC's COUNTERS_DB virtual paths (target ``COUNTERS_DB``) and NVIDIA Cumulus Linux's openconfig paths."""
from lockstep.exporters.catalog.model import counter, gauge

S = ("switch",)
PRIORITY = ("switch", "port", "priority", "direction")
QUEUE = ("switch", "port", "queue")

PAUSE_FRAMES = counter(
    "lockstep_switch_pfc_pause_frames_total",
    "PFC pause frames per switch port and priority. direction: rx (received from the link partner), tx (sent to "
    "it). SONiC: COUNTERS/Ethernet* SAI_PORT_STAT_PFC_<n>_RX_PKTS, SAI_PORT_STAT_PFC_<n>_TX_PKTS; Cumulus: "
    "/qos/interfaces/interface/switch-priority/state/counters/in-pause-pkts, out-pause-pkts.", PRIORITY)
PAUSE_DURATION = counter(
    "lockstep_switch_pfc_pause_duration_seconds_total",
    "Time a switch port spent paused per priority (the switch reports microseconds). direction: rx (paused by "
    "the partner), tx (the partner asked to pause). SONiC: COUNTERS/Ethernet* SAI_PORT_STAT_PFC_<n>_RX_PAUSE_DURATION_US "
    "(rx only, where the ASIC counts it); Cumulus: /qos/interfaces/interface/switch-priority/state/in-pause-duration, "
    "out-pause-duration.", PRIORITY, "seconds")
ECN_MARKED = counter(
    "lockstep_switch_queue_ecn_marked_packets_total",
    "Packets ECN-marked by a switch port's egress queue. SONiC: COUNTERS/Ethernet*/Queues "
    "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS; Cumulus: /qos/interfaces/interface/output/queues/queue/state/"
    "ecn-marked-pkts.", QUEUE)
DROPPED = counter(
    "lockstep_switch_queue_dropped_packets_total",
    "Packets dropped by a switch port's egress queue. cause: any (SONiC COUNTERS/Ethernet*/Queues "
    "SAI_QUEUE_STAT_DROPPED_PACKETS, every cause), wred (Cumulus .../output/queues/queue/state/wred-dropped-pkts), "
    "no_buffer (Cumulus .../state/no-buffer-uc-dropped-pkts).", QUEUE + ("cause",))
WATERMARK = gauge(
    "lockstep_switch_queue_watermark_bytes",
    "Peak occupancy of a switch port's egress queue since the switch last cleared its watermarks. SONiC: "
    "COUNTERS/Ethernet*/Queues SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES; Cumulus: /qos/interfaces/interface/output/"
    "queues/queue/state/max-queue-len.", QUEUE, "bytes")
WATCHDOG_STORMED = gauge(
    "lockstep_switch_pfc_watchdog_stormed",
    "1 while the switch's PFC watchdog holds the queue as stormed, 0 while operational. SONiC: COUNTERS/Ethernet*/"
    "Pfcwd PFC_WD_STATUS (stormed, operational); Cumulus publishes no watchdog over gNMI.", QUEUE)
WATCHDOG_STORMS = counter(
    "lockstep_switch_pfc_watchdog_storms_total",
    "PFC storms the switch's watchdog detected on the queue (event=detected) and recovered from (event=restored). "
    "SONiC: COUNTERS/Ethernet*/Pfcwd PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED, PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED.",
    QUEUE + ("event",))
WATCHDOG_DROPPED = counter(
    "lockstep_switch_pfc_watchdog_dropped_packets_total",
    "Packets the PFC watchdog's action dropped on a stormed queue. direction: rx, tx. SONiC: COUNTERS/Ethernet*/"
    "Pfcwd PFC_WD_QUEUE_STATS_RX_DROPPED_PACKETS, PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS.", QUEUE + ("direction",))

UP = gauge("lockstep_switch_gnmi_up", "1 while the gNMI subscription to the switch is open, 0 otherwise.", S)
LAST_UPDATE = gauge("lockstep_switch_gnmi_last_update_timestamp_seconds",
                    "Unix time of the last notification received from the switch.", S, "seconds")
UPDATES = counter("lockstep_switch_gnmi_updates_total", "gNMI updates received from the switch and decoded.", S)
ERRORS = counter("lockstep_switch_gnmi_errors_total",
                 "Errors on the switch's gNMI subscription. kind: rpc (the call failed or the server went away), "
                 "decode (an update the path set cannot read: dropped, the others kept).", S + ("kind",))
TARGET_INFO = gauge("lockstep_switch_target_info",
                    "Always 1; the gNMI address and path set (sonic, cumulus) of a configured switch.",
                    ("switch", "address", "path_set"))

METRICS = (PAUSE_FRAMES, PAUSE_DURATION, ECN_MARKED, DROPPED, WATERMARK, WATCHDOG_STORMED, WATCHDOG_STORMS,
           WATCHDOG_DROPPED, UP, LAST_UPDATE, UPDATES, ERRORS, TARGET_INFO)
