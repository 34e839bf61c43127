"""alertmanager.yml as code: severity routing, grouping, the quarantine hook and the inhibitions."""
from __future__ import annotations

from lockstep.alerts.model import dump
from lockstep.alerts.quarantine import DRAIN_ALERTS, HOST_ALERTS, XID_ALERTS
from lockstep.alerts.settings import AlertsConfig
from lockstep.exporters.catalog.enums import PAGE, TICKET

GROUP_BY = ["cluster", "job_id", "alertname"]
# What the quarantine receiver is sent: the hardware faults it drains for, and the XID alerts it
# drains for by their action label.
QUARANTINE_ALERTS = DRAIN_ALERTS + XID_ALERTS
GPU_LOWER = "GPUXid.*|GPUUncorrectableECC|GPURowRemap.*|GPUThermalThrottling"
# The node agent's view of an HCA port, which the fabric exporter's verdict on the same link explains.
HOST_LINK = "InfiniBandLinkFlapping|InfiniBandSymbolErrors|InfiniBandLinkDegraded"


def inhibit_rules(config: AlertsConfig) -> list[dict]:
    """What a firing alert mutes. Alertmanager's ``equal`` compares label values, a label missing on both
    sides counting as equal; every target below always carries the labels it is compared on."""
    return [
        # A pause storm freezes the rail, so the job on it straggles and stalls: that is the storm's
        # symptom, not a second problem. PFCPauseStorm carries the job_id of the job on the storming
        # node (recording rule lockstep:node_job:info joined in rules_hardware.pfc), so muting by
        # equal job_id mutes exactly the alerts of the jobs on that rail. A storm on a node without
        # a job has no job_id and mutes nothing (job alerts always carry job_id).
        {"source_matchers": ['alertname="PFCPauseStorm"'],
         "target_matchers": ['alertname=~"TrainingJobStraggler|TrainingJobStalled"'],
         "equal": ["cluster", "job_id"]},
        # A hung job is also stalled and its ranks all look slow; page once, for the hang.
        {"source_matchers": ['alertname="TrainingJobHung"'],
         "target_matchers": ['alertname=~"TrainingJobStalled|TrainingJobStraggler"'],
         "equal": ["cluster", "job_id"]},
        # A rank the hung job waits for, named, explains its stall, its hang and its slow-looking ranks.
        {"source_matchers": ['alertname="TrainingJobRankHung"'],
         "target_matchers": ['alertname=~"TrainingJobStalled|TrainingJobStraggler|TrainingJobHung"'],
         "equal": ["cluster", "job_id"]},
        # A lost member explains why the rest of its job stands still (or looks hung): page for the member.
        {"source_matchers": ['alertname="TrainingJobMemberLost"'],
         "target_matchers": ['alertname=~"TrainingJobStalled|TrainingJobStraggler|TrainingJobHung"'],
         "equal": ["cluster", "job_id"]},
        # A GPU that fell off the bus explains its XIDs, ECC and throttling.
        {"source_matchers": ['alertname="GPUFellOffBus"'],
         "target_matchers": [f'alertname=~"{GPU_LOWER}"'],
         "equal": ["cluster", "node", "gpu"]},
        # A link that is down explains its flaps, symbol errors and rate.
        {"source_matchers": ['alertname="InfiniBandLinkDown"'],
         "target_matchers": ['alertname=~"InfiniBandLinkFlapping|InfiniBandSymbolErrors|InfiniBandLinkDegraded"'],
         "equal": ["cluster", "node", "device", "port"]},
        # The fabric exporter's verdict on a host link names both ends and its reasons: it explains the node
        # agent's tickets on the same HCA (matched by node and device: the fabric's `port` is the switch's
        # on one end, so ports are not compared; a dual-port HCA's other port is muted too). A failed link
        # explains its degraded verdict. Only sources with a node: a switch-to-switch link has none and
        # would mute every node-less LinkDegraded of the cluster.
        {"source_matchers": ['alertname="LinkFailed"', 'node=~".+"'],
         "target_matchers": [f'alertname=~"LinkDegraded|{HOST_LINK}"'],
         "equal": ["cluster", "node", "device"]},
        {"source_matchers": ['alertname="LinkDegraded"', 'node=~".+"'],
         "target_matchers": [f'alertname=~"{HOST_LINK}"'],
         "equal": ["cluster", "node", "device"]},
        # A port the node agent sees down pages already; the fabric's failed verdict on it (link_downed
        # moved) is the same fault, seen from the switch.
        {"source_matchers": ['alertname="InfiniBandLinkDown"'],
         "target_matchers": ['alertname=~"LinkFailed|LinkDegraded"'],
         "equal": ["cluster", "node", "device"]},
        # A node whose agent is down: whatever else still fires for it is stale or a consequence. Only a
        # source with a node: ExporterDown{signal="targets_gone"} has none and would mute every node-less
        # alert (the power exporter's, the analytics service's) of the cluster.
        {"source_matchers": ['alertname="ExporterDown"', config.selectors.node, 'node=~".+"'],
         "target_matchers": ['alertname=~"PFCPauseStorm|InfiniBand.*|GPU.*|ExporterCollectorFailing"'],
         "equal": ["cluster", "node"]},
    ]


def _webhook(url: str, send_resolved: bool = True, token_file: str = "") -> dict:
    hook: dict = {"url": url, "send_resolved": send_resolved}
    if token_file:
        hook["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": token_file}}
    return hook


def receivers(config: AlertsConfig) -> list[dict]:
    r = config.routing
    pager: dict = {"name": "pager", "webhook_configs": [_webhook(r.pager_webhook_url)]}
    if r.pagerduty_routing_key_file:
        pager["pagerduty_configs"] = [{"routing_key_file": r.pagerduty_routing_key_file, "send_resolved": True}]
    result = [pager, {"name": "queue", "webhook_configs": [_webhook(r.queue_webhook_url)]}]
    if r.quarantine_webhook_url:
        # Resolved notifications are useless to it: undraining is a human decision.
        result.append({"name": "quarantine", "webhook_configs": [
            _webhook(r.quarantine_webhook_url, False, r.quarantine_bearer_token_file)]})
    return result


def route(config: AlertsConfig) -> dict:
    r = config.routing
    routes = []
    if r.quarantine_webhook_url:
        routes.append({"receiver": "quarantine", "matchers": [f'alertname=~"{"|".join(QUARANTINE_ALERTS)}"'],
                       "continue": True})
        routes.append({"receiver": "quarantine", "matchers": [f'alertname=~"{"|".join(HOST_ALERTS)}"', 'node=~".+"'],
                       "continue": True})
    routes += [{"receiver": "pager", "matchers": [f'severity="{PAGE}"'], "group_wait": r.pager_group_wait},
               {"receiver": "queue", "matchers": [f'severity="{TICKET}"']}]
    return {"receiver": "queue", "group_by": GROUP_BY, "group_wait": r.group_wait,
            "group_interval": r.group_interval, "repeat_interval": r.repeat_interval, "routes": routes}


def config_dict(config: AlertsConfig) -> dict:
    return {"route": route(config), "receivers": receivers(config), "inhibit_rules": inhibit_rules(config)}


def render(config: AlertsConfig) -> str:
    header = "# Generated by `lockstep alerts build`; edit alerts/*.py or the alerts config, not this file.\n"
    return header + dump(config_dict(config))
