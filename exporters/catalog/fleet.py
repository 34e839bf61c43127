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

METRICS = (REPEAT_OFFENDER, NODE_DRAINS)
