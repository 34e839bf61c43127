"""What a device id the kubelet reports for an NVIDIA resource means to the GPU collector.

Device plugins name GPUs in several ways: the NVIDIA plugin by UUID (``GPU-...``; ``MIG-...`` for a MIG
device, ``MIG-GPU-<uuid>/<gi>/<ci>`` before driver R470) or, with ``--device-id-strategy=index``, by index
(``3``, ``3:1`` for MIG device 1 of GPU 3); a time-sliced replica gets ``::<replica>`` appended
(k8s-device-plugin ``AnnotatedID``); GKE's plugin says ``nvidia3`` and ``nvidia3/gi1``
(dcgm-exporter's ``gkeMigDeviceIDRegex``). Everything resolves to the parent GPU's index and the UUID
the ``uuid`` label carries (the MIG UUID for a MIG device).
"""
from __future__ import annotations

import re
from typing import Mapping, NamedTuple

_REPLICA = re.compile(r"::\d+$")
_INDEX = re.compile(r"^(?:nvidia)?(\d+)(?:[:/].*)?$")   # 3, 3:1, nvidia3, nvidia3/gi1

# Resource names of NVIDIA GPUs: whole GPUs (and MIG devices with the "single" strategy), time-sliced
# GPUs renamed by the plugin, and MIG devices with the "mixed" strategy (nvidia.com/mig-1g.10gb).
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


class DeviceRef(NamedTuple):
    gpu: str     # the collector's ``gpu`` label: the (parent) GPU's index, "" where unknown
    uuid: str    # GPU-... or MIG-...; "" where the id doesn't say and the GPU backend doesn't know


def is_gpu_resource(name: str) -> bool:
    return name in GPU_RESOURCES or name.startswith(MIG_RESOURCE_PREFIX)


def refs_from_uuids(uuids: Mapping[str, str]) -> dict[str, DeviceRef]:
    """``{device id: DeviceRef}`` from the GPU backend's ``{index: uuid}``: each GPU by index and UUID."""
    refs = {}
    for index, uuid in uuids.items():
        refs[index] = DeviceRef(index, uuid)
        if uuid:
            refs[uuid] = refs[index]
    return refs


def resolve(device_id: str, refs: Mapping[str, DeviceRef]) -> DeviceRef:
    """The GPU a device id names; what the id alone says where the backend doesn't know it (a MIG
    UUID: its own UUID with an unknown GPU; an index form: that GPU's index)."""
    bare = _REPLICA.sub("", device_id)
    if bare in refs:
        return refs[bare]
    if bare.startswith(("GPU-", "MIG-")):
        return DeviceRef("", bare)
    index = _INDEX.match(bare)
    if index is not None:
        return refs.get(index.group(1), DeviceRef(index.group(1), ""))
    return DeviceRef("", "")
