"""A simulated kubelet's PodResources API: ``v1.PodResourcesLister`` over a unix socket, from the real proto.

It answers ``List`` and ``Get`` from the pods a callable returns (those of one node), the way the kubelet's
device manager does: every container of every pod, with the devices of each resource it holds.
"""
from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Callable, Iterable

import grpc

from lockstep.exporters.third_party.podresources import api_pb2, api_pb2_grpc
from lockstep.simulator.kubepods import SimPod


def pod_resources(pod: SimPod) -> api_pb2.PodResources:
    containers = [api_pb2.ContainerResources(
        name=c.name, devices=[api_pb2.ContainerDevices(resource_name=c.resource, device_ids=list(c.device_ids))]
        if c.device_ids else []) for c in pod.containers]
    return api_pb2.PodResources(name=pod.name, namespace=pod.namespace, containers=containers)


class PodResourcesServicer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, pods: Callable[[], Iterable[SimPod]]) -> None:
        self.pods = pods

    def List(self, request, context):
        return api_pb2.ListPodResourcesResponse(pod_resources=[pod_resources(p) for p in self.pods()])

    def Get(self, request, context):
        for pod in self.pods():
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod_resources(pod))
        context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found in {request.pod_namespace}")

    def GetAllocatableResources(self, request, context):
        return api_pb2.AllocatableResourcesResponse()


class Kubelet:
    """The PodResources server on ``socket`` (a path short enough for a unix socket: under 108 bytes)."""

    def __init__(self, socket: Path, pods: Callable[[], Iterable[SimPod]]) -> None:
        self.socket, self.pods = socket, pods
        self._server: grpc.Server | None = None

    def start(self) -> "Kubelet":
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(PodResourcesServicer(self.pods), self._server)
        if not self._server.add_insecure_port(f"unix://{self.socket.absolute()}"):
            raise OSError(f"cannot serve PodResources on {self.socket}")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        self.socket.unlink(missing_ok=True)

    def __enter__(self) -> "Kubelet":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
