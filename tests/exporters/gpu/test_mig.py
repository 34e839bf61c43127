"""MIG: per GPU-instance series labelled with instance and profile, the parent's unsupported fields
absent, and scheduler device ids (MIG UUIDs) resolved to the collector's labels for the job mapping."""
from __future__ import annotations

import pynvml
import pytest

from lockstep.exporters.collectors.jobs import JobsCollector, SlurmSource
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.mig import DeviceRef, profile_name, read_device_refs
from tests.helpers.gpu import NS, fake, h100, render
from tests.helpers.slurm import run_script

PARENT = "GPU-5e0b1b1a-7c3d-4f0e-8a55-91c3d2e4f600"
MIG_A = "MIG-4d5b1a2c-0b6e-5c0f-9a1b-2c3d4e5f6a7b"
MIG_B = "MIG-8e1f2a3b-4c5d-5e6f-8a9b-0c1d2e3f4a5b"
MIG_C = "MIG-0a1b2c3d-4e5f-5a6b-8c7d-9e0f1a2b3c4d"
MIB = 1 << 20


def mig_gpu() -> dict:
    """An H100 with MIG on: GPU instance 1 (2g.20gb) split into two 1c compute instances, GPU instance 5
    (1g.10gb) whole. With MIG on, NVML refuses the parent's utilization (as the A100 capture shows)."""
    migs = [{"gi": 1, "ci": 0, "uuid": MIG_A, "attrs": (2, 1, 19968), "mem": (19968 * MIB, 19000 * MIB, 968 * MIB)},
            {"gi": 1, "ci": 1, "uuid": MIG_B, "attrs": (2, 1, 19968), "mem": (19968 * MIB, 19000 * MIB, 968 * MIB)},
            None,
            {"gi": 5, "ci": 0, "uuid": MIG_C, "attrs": (1, 1, 9856), "mem": (9856 * MIB, 9800 * MIB, 56 * MIB)}]
    return h100(0, mig=[1, 1], migs=migs, util=NS)


@pytest.mark.parametrize("slices, memory_mb, name", [
    ((1, 1), 4864, "1g.5gb"), ((2, 2), 9984, "2g.10gb"), ((3, 3), 20096, "3g.20gb"), ((7, 7), 40192, "7g.40gb"),
    ((2, 1), 9984, "1c.2g.10gb"),
])
def test_profile_names_match_nvidia_smi(slices, memory_mb, name):
    """A100-SXM4-40GB's GPU instance profiles as `nvidia-smi mig -lgip` names them (memory 4.75, 9.75,
    19.62, 39.25 GiB), and a compute instance of one slice in a two-slice GPU instance."""
    attrs = pynvml.c_nvmlDeviceAttributes(gpuInstanceSliceCount=slices[0], computeInstanceSliceCount=slices[1],
                                          memorySizeMB=memory_mb)
    assert profile_name(attrs) == name


def test_mig_instances_are_reported_and_parent_utilization_absent():
    collector = GpuCollector(fake.FakeNvml([mig_gpu(), h100(1)]), None, GpuOptions("nvml"), watch_xid=False)
    text = render(collector)
    collector.close()
    assert 'lockstep_gpu_mig_mode{gpu="0"} 1' in text and 'lockstep_gpu_mig_mode{gpu="1"} 0' in text
    assert 'lockstep_gpu_utilization_ratio{gpu="0"}' not in text and 'lockstep_gpu_utilization_ratio{gpu="1"}' in text
    assert (f'lockstep_gpu_mig_info{{gpu="0",gpu_instance="1",compute_instance="1",profile="1c.2g.20gb",'
            f'uuid="{MIG_B}"}} 1') in text
    assert f'lockstep_gpu_mig_info{{gpu="0",gpu_instance="5",compute_instance="0",profile="1g.10gb",uuid="{MIG_C}"}} 1' in text
    used = [line for line in text.splitlines() if line.startswith("lockstep_gpu_mig_memory_used_bytes")]
    assert used == [f'lockstep_gpu_mig_memory_used_bytes{{gpu="0",gpu_instance="1",profile="1c.2g.20gb"}} {968 * MIB}',
                    f'lockstep_gpu_mig_memory_used_bytes{{gpu="0",gpu_instance="5",profile="1g.10gb"}} {56 * MIB}']


def test_device_ids_resolve_to_gpu_and_instance():
    refs = read_device_refs(fake.FakeNvml([mig_gpu(), h100(1)]))
    assert refs["0"] == refs[PARENT] == DeviceRef("0", "", PARENT)
    assert refs[MIG_B] == DeviceRef("0", "1", MIG_B) and refs[MIG_C] == DeviceRef("0", "5", MIG_C)
    assert refs[f"MIG-{PARENT}/5/0"] == refs[MIG_C]   # the pre-R470 id form the k8s device plugin used
    # the k8s device plugin's index strategy: <gpu>:<NVML MIG slot> (go-nvlib's VisitMigDevices passes the
    # slot, empty slots skipped but counted: MIG_C sits in slot 3, behind the empty slot 2)
    assert refs["0:1"] == refs[MIG_B] and refs["0:3"] == refs[MIG_C] and "0:2" not in refs
    assert refs["1"].gpu_instance == ""


@pytest.mark.integration
def test_slurm_mapping_keyed_by_mig_uuid(tmp_path):
    """The prolog files a job on a MIG device under its UUID; the jobs collector maps it to the parent GPU
    and keeps the MIG UUID, which joins lockstep_gpu_mig_info for the instance."""
    assert run_script("prolog-gpu-jobs.sh", {"SLURM_JOB_ID": "77", "CUDA_VISIBLE_DEVICES": MIG_C,
                                             "SLURM_JOB_USER": "carol"}, tmp_path).returncode == 0
    jobs = tmp_path / "node00/gpu-jobs"
    assert sorted(p.name for p in jobs.iterdir() if not p.name.startswith(".")) == [MIG_C]
    collector = JobsCollector(SlurmSource(jobs, tmp_path / "node00/gpu-jobs-users"), None,
                              lambda: read_device_refs(fake.FakeNvml([mig_gpu(), h100(1)])))
    assert [s.labels[:4] for s in collector.collect()] == [("0", MIG_C, "77", "carol")]


def test_kubernetes_mapping_of_a_mig_device(tmp_path):
    """The kubelet names a container's MIG device by MIG UUID (or, with the index strategy, by GPU and
    NVML slot): its job row carries the parent GPU's index and the MIG UUID, as the Slurm mapping does."""
    from lockstep.exporters.kube.identity import PodMeta
    from lockstep.exporters.kube.mapping import Rules, join
    from lockstep.exporters.kube.podresources import ContainerGpus

    refs = read_device_refs(fake.FakeNvml([mig_gpu(), h100(1)]))
    pods = {("ml", "a"): PodMeta("ml", "a", {}, {}), ("ml", "b"): PodMeta("ml", "b", {}, {})}
    containers = [ContainerGpus("ml", "a", "c", (MIG_C,)), ContainerGpus("ml", "b", "c", ("0:1",))]
    rows, unknown = join(containers, pods, refs, Rules((), ()))
    assert unknown == [] and [(r.gpu, r.uuid, r.job_id) for r in rows] == [("0", MIG_C, "ml/a"), ("0", MIG_B, "ml/b")]
