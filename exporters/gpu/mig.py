"""MIG devices through NVML, and the one mapping from any GPU or MIG device id a scheduler uses to
the collector's ``(gpu, gpu_instance)`` labels.

With MIG enabled, a GPU is split into GPU instances (own memory and SM slices), each holding compute
instances; a "MIG device" is one compute instance and has its own NVML handle and UUID. Schedulers
name what they hand out by MIG UUID (``MIG-<uuid>`` from R470; ``MIG-GPU-<uuid>/<gi>/<ci>`` before),
which ``device_labels`` resolves for the Slurm and Kubernetes job mappings alike.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import pynvml

from exporters.gpu.errors import NvmlGuard, error_code
from exporters.gpu.protocol import Nvml
from exporters.gpu.snapshot import MigDevice


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


def device_labels(gpus: Iterable[tuple[int, str, Iterable[MigDevice]]]) -> Mapping[str, tuple[str, str]]:
    """``{device id: (gpu, gpu_instance)}`` for every id a scheduler may use: the GPU index and UUID
    (gpu_instance ""), each MIG device's UUID and its pre-R470 ``MIG-GPU-<uuid>/<gi>/<ci>`` name.
    ``gpus``: (index, UUID, MIG devices) of each GPU, as the collector read them."""
    out: dict[str, tuple[str, str]] = {}
    for index, uuid, migs in gpus:
        out[str(index)] = (str(index), "")
        if uuid:
            out[uuid] = (str(index), "")
        for mig in migs:
            labels = (str(index), str(mig.gpu_instance))
            if mig.uuid:
                out[mig.uuid] = labels
            if uuid and mig.compute_instance is not None:
                out[f"MIG-{uuid}/{mig.gpu_instance}/{mig.compute_instance}"] = labels
    return out
