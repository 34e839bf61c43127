"""Which training job a pod belongs to, and its rank there, from the pod's labels and owner.

The job is named by the first label of an ordered list that the pod carries (``KEY``, or ``KEY+GROUP`` for
a name made of two labels: ``<KEY value>-<GROUP value>``), else by its controlling StatefulSet or Job, else
the pod is its own job. ``job_id`` is ``<namespace>/<name>``. The rank is the first of an ordered list of
index labels (or annotations, where the operator sets the index as one). The defaults come from each
operator's source (tests/fixtures/kubernetes/README.md names file and line):

- JobSet, and Kubeflow Trainer v2 (a TrainJob runs as a JobSet of its name):
  ``jobset.sigs.k8s.io/jobset-name``; rank: the Indexed Job's ``batch.kubernetes.io/job-completion-index``
- Kubeflow Training Operator v1 (PyTorchJob, TFJob, MPIJob ...): ``training.kubeflow.org/job-name``;
  rank ``training.kubeflow.org/replica-index`` (per replica type: master 0 and worker 0 both say 0)
- Volcano: ``volcano.sh/job-name``; rank ``volcano.sh/task-index`` (per task)
- LeaderWorkerSet: each group is a unit of its own, named ``<lws>-<group index>`` like its leader pod;
  rank ``leaderworkerset.sigs.k8s.io/worker-index``
- batch/v1 Job: ``batch.kubernetes.io/job-name`` (1.27+), ``job-name`` (older); rank: completion index
- StatefulSet: its controller owner reference; rank ``apps.kubernetes.io/pod-index`` (1.28+), else the
  ordinal the StatefulSet controller puts at the end of the pod's name
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

DEFAULT_JOB_LABELS = (
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "volcano.sh/job-name",
    "leaderworkerset.sigs.k8s.io/name+leaderworkerset.sigs.k8s.io/group-index",
    "batch.kubernetes.io/job-name",
    "job-name",
)
DEFAULT_RANK_LABELS = (
    "training.kubeflow.org/replica-index",
    "batch.kubernetes.io/job-completion-index",
    "volcano.sh/task-index",
    "leaderworkerset.sigs.k8s.io/worker-index",
    "apps.kubernetes.io/pod-index",
)
OWNER_KINDS = ("StatefulSet", "Job")
_ORDINAL = re.compile(r"-(\d+)$")


@dataclass(frozen=True, slots=True)
class PodMeta:
    """What the mapping needs of a Pod object."""
    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_kind: str = ""   # the controlling owner reference, "" for none
    owner_name: str = ""
    uid: str = ""          # metadata.uid: names the pod's cgroup (the per-job I/O collector)


@dataclass(frozen=True, slots=True)
class JobIdentity:
    job_id: str
    rank: str


def pod_meta(pod: Mapping[str, Any]) -> PodMeta:
    """A Pod object as the API server sends it (JSON) → ``PodMeta``."""
    meta = pod.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), {})
    return PodMeta(meta.get("namespace", ""), meta.get("name", ""), dict(meta.get("labels") or {}),
                   dict(meta.get("annotations") or {}), owner.get("kind", ""), owner.get("name", ""),
                   str(meta.get("uid") or ""))


def validate_label_keys(keys: Sequence[str]) -> tuple[str, ...]:
    """Each entry is ``KEY`` or ``KEY+GROUP``, keys non-empty and without spaces (a flag's value)."""
    for entry in keys:
        if not all(part and not any(c.isspace() for c in part) for part in entry.split("+")) \
                or entry.count("+") > 1:
            raise ValueError(f"label key {entry!r}: expected KEY or KEY+GROUP_KEY")
    return tuple(keys)


def job_identity(pod: PodMeta, job_labels: Sequence[str] = DEFAULT_JOB_LABELS,
                 rank_labels: Sequence[str] = DEFAULT_RANK_LABELS) -> JobIdentity:
    return JobIdentity(f"{pod.namespace}/{_job_name(pod, job_labels)}", _rank(pod, rank_labels))


def _job_name(pod: PodMeta, job_labels: Sequence[str]) -> str:
    for entry in job_labels:
        key, _, group = entry.partition("+")
        name = pod.labels.get(key)
        if name and (not group or pod.labels.get(group)):
            return f"{name}-{pod.labels[group]}" if group else name
    if pod.owner_kind in OWNER_KINDS and pod.owner_name:
        return pod.owner_name
    return pod.name


def _rank(pod: PodMeta, rank_labels: Sequence[str]) -> str:
    for key in rank_labels:
        value = pod.labels.get(key) or pod.annotations.get(key)
        if value:
            return value
    ordinal = _ORDINAL.search(pod.name) if pod.owner_kind == "StatefulSet" else None
    return ordinal.group(1) if ordinal else ""
