"""Series that lockstep's own recording rules record and another package reads by name.

The analytics inputs: each input the scorers read (``lockstep.analytics.frame.inputs``) that the TSDB
reduces from several raw series per rank or node (a ratio of two gauges, the present throttling
reasons, rates summed per HCA or per node), recorded as one series per rank (GPU or HCA) or node at
the analytics' step (``lockstep.alerts.recording`` writes the rules; the analytics service reads them
where the store holds them). Their value at a step is the input's own query evaluated there over the
whole cluster, so a refresh reads one series per rank and input instead of reducing the raw ones.
"""
from __future__ import annotations

ANALYTICS_GROUP = "lockstep.analytics-inputs"
# One series, the group's step in seconds, while the group runs: the inputs that are present only now and
# then (a throttling reason, a link fault) cannot tell by themselves whether they are recorded. Its label
# ``inputs`` names the inputs the group records (comma-separated), so a service reads recorded only what
# the store's rules record; a group written before the label recorded ``FIRST_RECORDED``.
ANALYTICS_STEP = "lockstep:analytics_inputs:step_seconds"
ANALYTICS_STEP_LABEL = "inputs"

# input name → recorded series
ANALYTICS_INPUTS = {
    "clock": "lockstep:analytics_clock:ratio",
    "reasons": "lockstep:analytics_reasons:present",
    "tx": "lockstep:analytics_tx:rate",
    "xmit_wait": "lockstep:analytics_xmit_wait:rate",
    "link": "lockstep:analytics_link:present",
    "read": "lockstep:analytics_read:rate",
    "write": "lockstep:analytics_write:rate",
    "pause": "lockstep:analytics_pause:rate",
    "cnp": "lockstep:analytics_cnp:rate",
    # NCCL Inspector's all-reduce time, kept per job (a rank's series carry the job id the node agent joined)
    "collective": "lockstep:analytics_collective:max",
}
FIRST_RECORDED = ("clock", "reasons", "tx", "xmit_wait", "link", "read", "write", "pause", "cnp")

# The fleet pass's inputs (``lockstep.analytics.frame.peers``): each feature's per-GPU value while the GPU was loaded,
# and the loaded utilization itself, recorded unaggregated every minute (the pass's own resolution) in a group of their
# own, so that the pass reads 15 recorded samples per GPU and feature instead of evaluating its joins over the whole
# fleet at 15 steps (at 65,536 GPUs, minutes of the store's CPU every pass). The step series says the group runs.
FLEET_INPUTS_GROUP = "lockstep.fleet-inputs"
FLEET_INPUTS_STEP = "lockstep:fleet_inputs:step_seconds"
# feature name → recorded series
FLEET_INPUTS = {name: f"lockstep:fleet_{name}:loaded" for name in ("sm_clock", "power", "temperature_c", "power_w",
                                                                  "pcie")}
FLEET_LOADED = "lockstep:fleet_utilization:loaded"
# What the features are read under (the rules and the pass's own queries use the same figures)
FLEET_STEP_S = 60.0              # the pass's resolution, and the group's interval
FLEET_LOADED_UTILIZATION = 0.8   # a sample counts while the GPU was at least this busy
FLEET_POWER_CAPPED = 0.95        # at this share of its power limit a GPU's clock gives way by design: not evidence
