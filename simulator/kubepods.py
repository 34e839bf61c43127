"""Simulated Kubernetes pods, and the JSON the API server sends for them.

The shape is a core/v1 Pod as ``GET /api/v1/pods`` returns it (metadata with labels, annotations,
controlling owner reference, resourceVersion; spec with nodeName and containers' GPU limits; status with
phase and podIP); list items carry no kind/apiVersion (only kubectl adds them), watch event objects do.
Labels come from the callers, who write them from what each operator sets (tests/fixtures/kubernetes/).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

GPU_RESOURCE = "nvidia.com/gpu"
CREATED = "2025-01-01T00:00:00Z"


@dataclass(frozen=True)
class SimContainer:
    name: str
    device_ids: tuple[str, ...] = ()          # what the device plugin handed out (GPU UUIDs, MIG UUIDs ...)
    resource: str = GPU_RESOURCE


@dataclass(frozen=True)
class SimPod:
    namespace: str
    name: str
    node: str
    containers: tuple[SimContainer, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: tuple[str, str, str] | None = None   # (apiVersion, kind, name) of the controlling owner

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def uid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{self.namespace}/{self.name}"))


def pod_json(pod: SimPod, resource_version: str, *, typed: bool = False, metadata_only: bool = False) -> dict[str, Any]:
    """The Pod; with ``metadata_only``, the ``PartialObjectMetadata`` a client asking for
    ``as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`` gets (client-go's metadata informers)."""
    metadata = _metadata(pod, resource_version)
    if metadata_only:
        return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    doc = {"metadata": metadata, "spec": _spec(pod), "status": {"phase": "Running", "qosClass": "Burstable"}}
    return {"kind": "Pod", "apiVersion": "v1", **doc} if typed else doc


def _metadata(pod: SimPod, resource_version: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                                "resourceVersion": resource_version, "creationTimestamp": CREATED}
    if pod.labels:
        metadata["labels"] = dict(pod.labels)
    if pod.annotations:
        metadata["annotations"] = dict(pod.annotations)
    if pod.owner:
        api_version, kind, name = pod.owner
        metadata["ownerReferences"] = [{
            "apiVersion": api_version, "kind": kind, "name": name, "controller": True, "blockOwnerDeletion": True,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{pod.namespace}/{name}"))}]
    return metadata


def _spec(pod: SimPod) -> dict[str, Any]:
    containers = []
    for c in pod.containers:
        resources = {"limits": {c.resource: str(len(c.device_ids))}} if c.device_ids else {}
        containers.append({"name": c.name, "image": "nvcr.io/nvidia/pytorch:24.08-py3", "resources": resources,
                           "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                           "imagePullPolicy": "IfNotPresent"})
    return {"nodeName": pod.node, "containers": containers, "restartPolicy": "Never",
            "schedulerName": "default-scheduler", "serviceAccountName": "default", "dnsPolicy": "ClusterFirst"}
