"""Fleet health: what the quarantine receiver knows of each node's drains (``GET /metrics`` on the
receiver), the repeat offenders among them, and the recording rules' event counts per node and GPU."""
from lockstep.exporters.catalog.model import gauge

REPEAT_OFFENDER = gauge(
    "lockstep_fleet_repeat_offender",
    "1 if the quarantine receiver drained the node more than once within 7 days: held for a human to clear "
    "(never returned automatically, even with --return-when-resolved); 0 for a node drained once in 30 days.",
    ("node",))
NODE_DRAINS = gauge(
    "lockstep_fleet_node_drains",
    "Drains of the node by the quarantine receiver within the window (7d or 30d), from its own state file.",
    ("node", "window"))

NODE_DRAINED = gauge(
    "lockstep_fleet_node_drained",
    "1 while the quarantine receiver holds the node drained (drained by it within 24 h and not returned), "
    "0 for a node it drained within 30 days and has returned or forgotten.", ("node",))

METRICS = (REPEAT_OFFENDER, NODE_DRAINS, NODE_DRAINED)

# Peer-relative health, computed by the analytics service: each GPU against the GPUs of its model and
# driver across the fleet, on features read while loaded (lockstep.analytics.scoring.peers names them).
PEER_OUTLIER_SCORE = gauge(
    "lockstep_gpu_peer_outlier_score",
    "How far the GPU is from the median of its peers (same model and driver across the fleet) on its worst "
    "feature, in the bad direction, in robust units (MAD-scaled); absent while it was not loaded long enough "
    "or has too few peers.", ("node", "gpu", "model"))
PEER_DEVIATION = gauge(
    "lockstep_gpu_peer_deviation",
    "The evidence: one feature's distance from the peer median in robust units, signed so that positive is "
    "worse (feature: sm_clock, power, thermal, pcie); only features beyond the outlier threshold.",
    ("node", "gpu", "model", "feature"))
PEER_DEGRADED = gauge(
    "lockstep_gpu_peer_degraded",
    "1 while the GPU's peer verdict is degraded (outlier score over the threshold for the persistence "
    "window), 0 otherwise.", ("node", "gpu", "model"))

METRICS += (PEER_OUTLIER_SCORE, PEER_DEVIATION, PEER_DEGRADED)
