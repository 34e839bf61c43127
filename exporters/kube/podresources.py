"""Which container holds which GPU: the kubelet's PodResources v1 ``List`` over its unix socket.

The kubelet serves ``v1.PodResourcesLister`` on ``/var/lib/kubelet/pod-resources/kubelet.sock`` (root's
socket: the agent connects as uid 0, as dcgm-exporter does). ``List`` answers from the kubelet's device
manager in memory, so it is asked on every scrape, with a deadline, as dcgm-exporter does: a pod that
ends between two scrapes is gone from the next one.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from lockstep.exporters.third_party.podresources import api_pb2, api_pb2_grpc

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
# Resource names of NVIDIA GPUs: whole GPUs (and MIG devices with the "single" strategy), time-sliced
# GPUs renamed by the plugin, and MIG devices with the "mixed" strategy (nvidia.com/mig-1g.10gb).
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def is_gpu_resource(name: str) -> bool:
    return name in GPU_RESOURCES or name.startswith(MIG_RESOURCE_PREFIX)


class KubeletUnavailable(RuntimeError):
    """The PodResources API did not answer (no socket, kubelet restarting, deadline passed)."""


@dataclass(frozen=True, slots=True)
class ContainerGpus:
    namespace: str
    pod: str
    container: str
    device_ids: tuple[str, ...]


def parse_list(response: api_pb2.ListPodResourcesResponse) -> list[ContainerGpus]:
    """A ``ListPodResourcesResponse`` → the NVIDIA GPU (and MIG) devices of each container holding any."""
    out = []
    for pod in response.pod_resources:
        for container in pod.containers:
            ids = tuple(i for d in container.devices if is_gpu_resource(d.resource_name) for i in d.device_ids)
            if ids:
                out.append(ContainerGpus(pod.namespace, pod.name, container.name, ids))
    return out


class PodResourcesClient:
    """One channel to the kubelet, kept between scrapes; dropped after a failure so that the next call
    dials afresh (a restarted kubelet makes a new socket) instead of waiting out gRPC's reconnect backoff."""

    def __init__(self, socket: Path, timeout_s: float) -> None:
        self.socket, self.timeout_s = socket, timeout_s
        self._channel: grpc.Channel | None = None

    def list(self) -> list[ContainerGpus]:
        if not self.socket.exists():
            raise KubeletUnavailable(f"kubelet PodResources socket {self.socket} not found")
        if self._channel is None:
            self._channel = grpc.insecure_channel(f"unix://{self.socket}")
        try:
            stub = api_pb2_grpc.PodResourcesListerStub(self._channel)
            return parse_list(stub.List(api_pb2.ListPodResourcesRequest(), timeout=self.timeout_s))
        except grpc.RpcError as exc:
            self.close()
            raise KubeletUnavailable(f"kubelet PodResources List at {self.socket}: {exc.code().name}: "
                                     f"{exc.details()}") from None

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
