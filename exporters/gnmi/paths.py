"""The path sets: what the switch exporter subscribes to on a SONiC
and on a Cumulus switch. Provenance of every path: tests/fixtures/gnmi/README.md."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.third_party.gnmi import gnmi_pb2
from lockstep.exporters.toolkit.gnmipath import parse_path


@dataclass(frozen=True)
class PathSet:
    name: str
    prefix_target: str  # the gNMI prefix's target: SONiC names the database, Cumulus none
    paths: tuple[str, ...]
    encoding: int  # gnmi_pb2.Encoding


# SONiC telemetry (sonic-gnmi) virtual paths of COUNTERS_DB: port counters (PFC frames and pause duration),
# queue counters (ECN marks, drops, watermarks) and the PFC watchdog's per-queue state and counters.
SONIC = PathSet("sonic", "COUNTERS_DB", ("COUNTERS/Ethernet*", "COUNTERS/Ethernet*/Queues", "COUNTERS/Ethernet*/Pfcwd"),
                gnmi_pb2.JSON_IETF)
_QOS = "/qos/interfaces/interface[interface-id=*]"
_QUEUE = f"{_QOS}/output/queues/queue[name=*]/state"
# NVIDIA Cumulus Linux gNMI (its user guide's Metrics, QoS tab): per switch priority and per egress queue.
CUMULUS = PathSet("cumulus", "", (
    f"{_QOS}/switch-priority[priority=*]/state/counters/in-pause-pkts",
    f"{_QOS}/switch-priority[priority=*]/state/counters/out-pause-pkts",
    f"{_QOS}/switch-priority[priority=*]/state/in-pause-duration",
    f"{_QOS}/switch-priority[priority=*]/state/out-pause-duration",
    f"{_QUEUE}/ecn-marked-pkts", f"{_QUEUE}/wred-dropped-pkts", f"{_QUEUE}/no-buffer-uc-dropped-pkts",
    f"{_QUEUE}/max-queue-len",
), gnmi_pb2.PROTO)
PATH_SETS = {s.name: s for s in (SONIC, CUMULUS)}


def subscribe_request(path_set: PathSet, sample_interval_s: float) -> gnmi_pb2.SubscribeRequest:
    """One STREAM subscription sampling every path of the set each ``sample_interval_s``."""
    prefix = gnmi_pb2.Path(target=path_set.prefix_target) if path_set.prefix_target else None
    subscriptions = [gnmi_pb2.Subscription(path=parse_path(p), mode=gnmi_pb2.SAMPLE,
                                           sample_interval=int(sample_interval_s * 1e9)) for p in path_set.paths]
    return gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        prefix=prefix, subscription=subscriptions, mode=gnmi_pb2.SubscriptionList.STREAM, encoding=path_set.encoding))
