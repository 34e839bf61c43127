"""What a device id a scheduler hands out means to the GPU collector, for the Slurm and Kubernetes sources alike.

Slurm's prolog names a GPU by index, GPU UUID or MIG UUID. Kubernetes device plugins say more: the NVIDIA
plugin names GPUs by UUID (``GPU-...``; ``MIG-...`` for a MIG device, ``MIG-GPU-<uuid>/<gi>/<ci>`` before
driver R470) or, with ``--device-id-strategy=index``, by index (``3``, ``3:1`` for the MIG device in NVML
slot 1 of GPU 3); a time-sliced replica gets ``::<replica>`` appended (k8s-device-plugin ``AnnotatedID``);
GKE's plugin says ``nvidia3``, ``nvidia3/gi1`` for GPU instance 1 of GPU 3, and ``/vgpu<n>`` after either
for a shared GPU (dcgm-exporter's ``gkeMigDeviceIDRegex``). ``lockstep.exporters.gpu.mig.device_refs`` knows the ids
NVML can name; ``resolve`` reads the other forms and says what an id alone says where NVML doesn't know it.
"""
from __future__ import annotations

import re
from typing import Mapping

from lockstep.exporters.gpu.mig import DeviceRef

_SHARED = re.compile(r"(::\d+|/vgpu\d+)$")            # a time-sliced replica, a GKE shared GPU
_GPU_INDEX = re.compile(r"^(?:nvidia)?(\d+)$")        # 3 (index strategy), nvidia3 (GKE)
_MIG_INDEX = re.compile(r"^(\d+):\d+$")               # 3:1 (index strategy)
_GKE_INSTANCE = re.compile(r"^nvidia(\d+)/gi(\d+)$")  # nvidia3/gi1
UNKNOWN = DeviceRef("", "", "")


def resolve(device_id: str, refs: Mapping[str, DeviceRef]) -> DeviceRef:
    """The GPU (and MIG instance) a device id names, from ``refs`` (``device_refs`` of the node's GPUs).
    Where NVML doesn't list it: a UUID is its own ``uuid`` with the GPU unknown, an index form its GPU's
    index; a MIG device by index never borrows its parent GPU's UUID (a job on one slice is not on the GPU)."""
    bare = _SHARED.sub("", device_id)
    if bare in refs:
        return refs[bare]
    if bare.startswith(("GPU-", "MIG-")):
        return DeviceRef("", "", bare)
    if (index := _GPU_INDEX.match(bare)) is not None:
        return refs.get(index[1], DeviceRef(index[1], "", ""))
    if (index := _MIG_INDEX.match(bare)) is not None:
        return DeviceRef(index[1], "", "")
    if (instance := _GKE_INSTANCE.match(bare)) is not None:
        return _instance(instance[1], instance[2], refs)
    return UNKNOWN


def _instance(gpu: str, gpu_instance: str, refs: Mapping[str, DeviceRef]) -> DeviceRef:
    """A GPU instance by its id: its MIG device where it holds one compute instance (as GKE partitions
    GPUs), else the instance without a UUID (which compute instance is meant, the id doesn't say)."""
    found = {ref for ref in refs.values() if ref.gpu == gpu and ref.gpu_instance == gpu_instance}
    return found.pop() if len(found) == 1 else DeviceRef(gpu, gpu_instance, "")
