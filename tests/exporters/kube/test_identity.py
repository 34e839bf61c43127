"""Training-job identity of a pod. Each pod below carries the labels its operator's controller sets, as
tests/fixtures/kubernetes/README.md cites them (file and line in the operator's source); no real pod
JSON of these operators was found to copy, so the pods are written from those facts."""
from __future__ import annotations

import pytest

from lockstep.exporters.kube.identity import (
    DEFAULT_JOB_LABELS,
    DEFAULT_RANK_LABELS,
    JobIdentity,
    PodMeta,
    job_identity,
    pod_meta,
    validate_label_keys,
)
from lockstep.simulator.kubepods import SimContainer, SimPod, pod_json


def pod(name: str, labels: dict, annotations: dict | None = None, owner: tuple | None = None,
        namespace: str = "ml-team") -> PodMeta:
    """Through the simulator's Pod JSON and back, the way the watcher reads pods."""
    return pod_meta(pod_json(SimPod(namespace, name, "node00", (SimContainer("c", ("0",)),), labels,
                                    annotations or {}, owner), "7"))


def test_pytorchjob_of_the_training_operator_v1():
    # GenLabels + SetReplicaType/SetReplicaIndex/SetJobRole (pod.go 401-408); PyTorch lowercases the type.
    master = pod("llama-pretrain-master-0", {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "llama-pretrain", "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/job-role": "master"})
    worker = pod("llama-pretrain-worker-6", {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "llama-pretrain", "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "6"})
    assert job_identity(master) == JobIdentity("ml-team/llama-pretrain", "0")
    assert job_identity(worker) == JobIdentity("ml-team/llama-pretrain", "6")


def jobset_pod(jobset: str, replicated: str, job_index: int, completion: int, *, as_label: bool) -> PodMeta:
    """A JobSet pod (jobset_controller.go 1020-1034) of an Indexed Job (the webhook's default): the Job
    controller always writes the completion index annotation, and the label too with PodIndexLabel."""
    job = f"{jobset}-{replicated}-{job_index}"
    labels = {"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": replicated,
              "jobset.sigs.k8s.io/job-index": str(job_index), "jobset.sigs.k8s.io/restart-attempt": "0",
              "batch.kubernetes.io/job-name": job, "job-name": job}
    index = {"batch.kubernetes.io/job-completion-index": str(completion)}
    return pod(f"{job}-{completion}-x7k2p", {**labels, **index} if as_label else labels, index,
               ("batch/v1", "Job", job))


def test_jobset_and_trainer_v2_name_the_jobset_not_its_child_job():
    # A TrainJob runs as a JobSet of its name: the same labels (docs/user-guides/megatron.md 398-399).
    assert job_identity(jobset_pod("llama-pretrain", "node", 0, 5, as_label=True)) == \
        JobIdentity("ml-team/llama-pretrain", "5")
    # Before PodIndexLabel, the completion index is an annotation only.
    assert job_identity(jobset_pod("llama-pretrain", "node", 0, 3, as_label=False)) == \
        JobIdentity("ml-team/llama-pretrain", "3")


def test_volcano_job():
    p = pod("resnet-worker-2", {"volcano.sh/job-name": "resnet", "volcano.sh/task-spec": "worker",
                                "volcano.sh/task-index": "2", "volcano.sh/job-namespace": "ml-team",
                                "volcano.sh/queue-name": "default"})
    assert job_identity(p) == JobIdentity("ml-team/resnet", "2")


def test_each_leaderworkerset_group_is_a_unit_of_its_own():
    lws = {"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/group-key": "9f1c"}
    leader = pod("vllm-1", {**lws, "leaderworkerset.sigs.k8s.io/group-index": "1",
                            "leaderworkerset.sigs.k8s.io/worker-index": "0", "apps.kubernetes.io/pod-index": "1"},
                 owner=("apps/v1", "StatefulSet", "vllm"))
    worker = pod("vllm-1-3", {**lws, "leaderworkerset.sigs.k8s.io/group-index": "1",
                              "leaderworkerset.sigs.k8s.io/worker-index": "3", "apps.kubernetes.io/pod-index": "3"},
                 {"leaderworkerset.sigs.k8s.io/leader-name": "vllm-1"}, ("apps/v1", "StatefulSet", "vllm-1"))
    assert job_identity(leader) == JobIdentity("ml-team/vllm-1", "0")
    assert job_identity(worker) == JobIdentity("ml-team/vllm-1", "3")


def test_plain_indexed_job_old_and_new_job_name_labels():
    new = pod("bench-2-abcde", {"batch.kubernetes.io/job-name": "bench", "job-name": "bench",
                                "batch.kubernetes.io/job-completion-index": "2"}, owner=("batch/v1", "Job", "bench"))
    old = pod("bench-1-fghij", {"job-name": "bench", "controller-uid": "u"},
              {"batch.kubernetes.io/job-completion-index": "1"}, ("batch/v1", "Job", "bench"))
    assert job_identity(new) == JobIdentity("ml-team/bench", "2")
    assert job_identity(old) == JobIdentity("ml-team/bench", "1")


def test_statefulset_by_owner_with_or_without_the_pod_index_label():
    labeled = pod("trainer-4", {"app": "trainer", "apps.kubernetes.io/pod-index": "4"},
                  owner=("apps/v1", "StatefulSet", "trainer"))
    older = pod("trainer-11", {"app": "trainer"}, owner=("apps/v1", "StatefulSet", "trainer"))
    assert job_identity(labeled) == JobIdentity("ml-team/trainer", "4")
    assert job_identity(older) == JobIdentity("ml-team/trainer", "11")


def test_a_pod_of_no_known_operator_is_its_own_job():
    bare = pod("notebook-7f9c", {"app": "jupyter"}, owner=("apps/v1", "ReplicaSet", "notebook-7f9c8d"))
    assert job_identity(bare) == JobIdentity("ml-team/notebook-7f9c", "")


def test_the_label_lists_are_configurable_and_ordered():
    p = pod("x-0", {"team.example.com/run": "sweep-12", "jobset.sigs.k8s.io/jobset-name": "js",
                    "team.example.com/rank": "9", "batch.kubernetes.io/job-completion-index": "0"})
    assert job_identity(p) == JobIdentity("ml-team/js", "0")
    custom = ("team.example.com/run", *DEFAULT_JOB_LABELS)
    assert job_identity(p, custom, ("team.example.com/rank", *DEFAULT_RANK_LABELS)) == \
        JobIdentity("ml-team/sweep-12", "9")


def test_label_key_lists_are_validated():
    assert validate_label_keys(["a/b", "a/b+c/d"]) == ("a/b", "a/b+c/d")
    for bad in (["a b"], ["+x"], ["a+b+c"], [""]):
        with pytest.raises(ValueError, match="expected KEY or KEY\\+GROUP_KEY"):
            validate_label_keys(bad)
