"""MIG devices through NVML, and the one mapping from any GPU or MIG device id a scheduler uses to
the collector's ``(gpu, gpu_instance)`` labels.

With MIG enabled, a GPU is split into GPU instances (own memory and SM slices), each holding compute
instances; a "MIG device" is one compute instance and has its own NVML handle and UUID. Schedulers
name what they hand out by MIG UUID (``MIG-<uuid>`` from R470; ``MIG-GPU-<uuid>/<gi>/<ci>`` before),
which ``device_refs`` / ``read_device_refs`` resolve for the Slurm and Kubernetes job mappings alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pynvml

from lockstep.exporters.gpu.errors import GpuLost, NvmlGuard, error_code
from lockstep.exporters.gpu.protocol import Nvml
from lockstep.exporters.gpu.snapshot import MigDevice


def profile_name(attributes: Any) -> str:
    """NVIDIA's profile name from ``nvmlDeviceGetAttributes`` of a MIG device, as the k8s device plugin
    builds it: "<g>g.<GB>gb" (memory rounded up to whole GiB), "<c>c.<g>g.<GB>gb" for a compute instance
    smaller than its GPU instance."""
    g, c = attributes.gpuInstanceSliceCount, attributes.computeInstanceSliceCount
    gb = (attributes.memorySizeMB + 1023) // 1024
    return f"{g}g.{gb}gb" if g == c else f"{c}c.{g}g.{gb}gb"


def read_migs(nvml: Nvml, g: NvmlGuard, parent: Any) -> tuple[MigDevice, ...]:
    """Every populated MIG device slot of one GPU (NotFound marks an empty slot)."""
    count = g.call("nvmlDeviceGetMaxMigDeviceCount", nvml.nvmlDeviceGetMaxMigDeviceCount, parent) or 0
    devices = []
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, index)
        except pynvml.NVMLError as exc:
            if error_code(exc) != pynvml.NVML_ERROR_NOT_FOUND:
                g.failed("nvmlDeviceGetMigDeviceHandleByIndex", error_code(exc))
            continue
        device = _device(nvml, g, index, handle)
        if device is not None:
            devices.append(device)
    return tuple(devices)


def _device(nvml: Nvml, g: NvmlGuard, index: int, handle: Any) -> MigDevice | None:
    gpu_instance = g.call("nvmlDeviceGetGpuInstanceId", nvml.nvmlDeviceGetGpuInstanceId, handle)
    if gpu_instance is None:
        return None
    attributes = g.call("nvmlDeviceGetAttributes", nvml.nvmlDeviceGetAttributes, handle)
    memory = g.call("nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, handle)
    return MigDevice(
        index=index, gpu_instance=int(gpu_instance),
        compute_instance=g.call("nvmlDeviceGetComputeInstanceId", nvml.nvmlDeviceGetComputeInstanceId, handle),
        uuid=g.call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle) or "",
        profile=profile_name(attributes) if attributes is not None else "",
        memory_used=memory.used if memory is not None else None,
        memory_total=memory.total if memory is not None else None)


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """What one scheduler device id means to the collector."""

    gpu: str            # the collector's ``gpu`` label (the parent GPU's index)
    gpu_instance: str   # the MIG GPU instance id, "" for a whole GPU
    uuid: str           # GPU-... or MIG-...: the ``uuid`` label of lockstep_gpu_job_info / _mig_info


def device_refs(gpus: Iterable[tuple[int, str, Iterable[MigDevice]]]) -> dict[str, DeviceRef]:
    """``{device id: DeviceRef}`` for every id a scheduler may hand out: the GPU index and UUID, each MIG
    device's UUID, its pre-R470 ``MIG-GPU-<uuid>/<gi>/<ci>`` name and its ``<gpu>:<NVML slot>`` index (the
    k8s device plugin's ``--device-id-strategy=index``; ``lockstep.exporters.jobs.devices`` reads the other forms).
    ``gpus``: (index, UUID, MIG devices) of each GPU, as the collector read them."""
    out: dict[str, DeviceRef] = {}
    for index, uuid, migs in gpus:
        out[str(index)] = DeviceRef(str(index), "", uuid)
        if uuid:
            out[uuid] = out[str(index)]
        for mig in migs:
            known = uuid and mig.compute_instance is not None
            legacy = f"MIG-{uuid}/{mig.gpu_instance}/{mig.compute_instance}" if known else ""
            ref = DeviceRef(str(index), str(mig.gpu_instance), mig.uuid or legacy)
            for key in (mig.uuid, legacy, f"{index}:{mig.index}"):
                if key:
                    out[key] = ref
    return out


def read_device_refs(nvml: Nvml) -> dict[str, DeviceRef]:
    """``device_refs`` of every GPU NVML sees now (NVML initialised by the caller); a lost GPU keeps its
    index with an empty UUID."""
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        g = NvmlGuard(index)
        try:
            handle = g.call("nvmlDeviceGetHandleByIndex", nvml.nvmlDeviceGetHandleByIndex, index)
            uuid = g.call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle) or ""
            mode = g.call("nvmlDeviceGetMigMode", nvml.nvmlDeviceGetMigMode, handle)
            migs = read_migs(nvml, g, handle) if mode and mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE else ()
        except GpuLost:
            uuid, migs = "", ()
        gpus.append((index, uuid, migs))
    return device_refs(gpus)
