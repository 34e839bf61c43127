"""The ``--jobs.kubernetes.*`` flags of the jobs collector, and the source they build."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from lockstep.exporters.gpu.mig import DeviceRef
from lockstep.exporters.kube.apiserver import ApiServer, from_kubeconfig, in_cluster
from lockstep.exporters.kube.identity import DEFAULT_JOB_LABELS, DEFAULT_RANK_LABELS, validate_label_keys
from lockstep.exporters.kube.mapping import KubernetesSource, Rules
from lockstep.exporters.kube.podresources import DEFAULT_SOCKET, PodResourcesClient
from lockstep.exporters.kube.podwatch import PodWatcher
from lockstep.exporters.registry import add_flag

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig


@dataclass(frozen=True)
class KubernetesOptions:
    kubelet_socket: Path = DEFAULT_SOCKET
    kubeconfig: Path | None = None            # None: in-cluster (the pod's service account)
    node_name: str = ""
    job_labels: tuple[str, ...] = DEFAULT_JOB_LABELS
    rank_labels: tuple[str, ...] = DEFAULT_RANK_LABELS
    kubelet_timeout_s: float = 2.0
    api_timeout_s: float = 10.0

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        flag = lambda name, **kw: add_flag(group, f"jobs.kubernetes.{name}", **kw)   # noqa: E731
        flag("kubelet-socket", help=f"the kubelet's PodResources socket (default {DEFAULT_SOCKET})")
        flag("kubeconfig", help="kubeconfig for the API server (default: in-cluster, the pod's service account)")
        flag("node-name", help="this node's Kubernetes name, whose pods are watched (default: --node.name)")
        flag("job-labels", help="pod label keys naming the training job, first found wins; KEY+GROUP joins two "
                                f"(default {','.join(DEFAULT_JOB_LABELS)}; then a StatefulSet or Job owner, "
                                "else the pod itself)")
        flag("rank-labels", help=f"pod label (or annotation) keys holding the rank, first found wins "
                                 f"(default {','.join(DEFAULT_RANK_LABELS)})")
        flag("kubelet-timeout", type=float, help="deadline of each PodResources List, seconds (default 2)")
        flag("api-timeout", type=float, help="timeout of each API server request, seconds (default 10)")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "KubernetesOptions":
        def keys(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
            value = config.flag(f"jobs.kubernetes.{name}")
            try:
                return default if value is None else validate_label_keys([k.strip() for k in value.split(",")])
            except ValueError as exc:
                raise ValueError(f"--jobs.kubernetes.{name}: {exc}") from None
        kubeconfig = config.flag("jobs.kubernetes.kubeconfig")
        return cls(Path(config.flag("jobs.kubernetes.kubelet-socket", DEFAULT_SOCKET)),
                   Path(kubeconfig) if kubeconfig else None,
                   config.flag("jobs.kubernetes.node-name", config.node_name),
                   keys("job-labels", DEFAULT_JOB_LABELS), keys("rank-labels", DEFAULT_RANK_LABELS),
                   config.flag("jobs.kubernetes.kubelet-timeout", 2.0), config.flag("jobs.kubernetes.api-timeout", 10.0))

    def detected(self, env: Mapping[str, str]) -> bool:
        """``--jobs.source=auto`` picks Kubernetes on a node with a kubelet socket, or in a pod."""
        return self.kubelet_socket.exists() or bool(env.get("KUBERNETES_SERVICE_HOST"))

    def api_server(self) -> ApiServer:
        return from_kubeconfig(self.kubeconfig) if self.kubeconfig else in_cluster(os.environ)

    def source(self, refs: Callable[[], Mapping[str, DeviceRef]]) -> KubernetesSource:
        """The source, its pod watch started (``close`` stops it)."""
        if not self.node_name:
            raise ValueError("--jobs.kubernetes.node-name: empty (the watch selects this node's pods)")
        watcher = PodWatcher(self.api_server(), self.node_name, request_timeout_s=self.api_timeout_s)
        watcher.start()
        return KubernetesSource(PodResourcesClient(self.kubelet_socket, self.kubelet_timeout_s), watcher, refs,
                                Rules(self.job_labels, self.rank_labels))
