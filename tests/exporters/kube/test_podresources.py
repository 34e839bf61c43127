"""The kubelet PodResources client against a real gRPC server on a unix socket speaking the real proto,
the checked-in generated code against its proto, and device ids → GPUs."""
from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

import pytest

from lockstep.exporters.gpu.mig import DeviceRef, device_refs
from lockstep.exporters.gpu.snapshot import MigDevice
from lockstep.exporters.jobs.devices import resolve
from lockstep.exporters.kube.podresources import ContainerGpus, KubeletUnavailable, PodResourcesClient
from lockstep.simulator.kubelet import Kubelet
from lockstep.simulator.kubepods import SimContainer, SimPod
from lockstep.stack import wait_on
from tests.helpers.paths import REPO

PACKAGE = REPO / "exporters" / "third_party" / "podresources"
U0, U1 = "GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000000", "GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001"
MIG = "MIG-5c1d2a3b-0000-5a6b-8c9d-00000000000a"
MIG_CI0, MIG_CI1 = "MIG-5c1d2a3b-0000-5a6b-8c9d-00000000000b", "MIG-5c1d2a3b-0000-5a6b-8c9d-00000000000c"


def generator():
    spec = importlib.util.spec_from_file_location("gen_podresources", REPO / "tools" / "gen_podresources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def socket_dir():
    """A short directory: a unix socket path must stay under 108 bytes (pytest's tmp_path can be longer)."""
    path = Path(tempfile.mkdtemp(prefix="kl", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_generated_code_comes_from_the_checked_in_proto_and_fits_the_pinned_ranges():
    digest = hashlib.sha256((PACKAGE / "kubelet-api.proto").read_bytes()).hexdigest()
    gen = generator()
    for name in gen.OUTPUTS:
        stamp = (PACKAGE / name).read_text().splitlines()[1]
        assert digest in stamp and f"grpcio-tools {gen.GRPCIO_TOOLS} " in stamp, f"{name}: run make proto"
    # the generated code refuses a runtime older than its generator: pyproject's lower bounds are those
    pb2 = (PACKAGE / "api_pb2.py").read_text()
    gencode = re.search(r"Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),", pb2).groups()
    grpc_gen = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", (PACKAGE / "api_pb2_grpc.py").read_text()).group(1)
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"protobuf>={'.'.join(gencode)},<8" in deps and f"grpcio>={grpc_gen},<2" in deps


def test_strip_gogo_restores_the_proto_an_older_kubelet_would_have_carried_gogo_options_in():
    gen = generator()
    proto = (PACKAGE / "kubelet-api.proto").read_text()
    assert gen.strip_gogo(proto) == proto           # the current file has none: unchanged
    gogo = proto.replace('package v1;\n', 'package v1;\n\nimport "github.com/gogo/protobuf/gogoproto/gogo.proto";\n'
                         'option (gogoproto.goproto_stringer_all) = false;\noption (gogoproto.stringer_all) =  true;\n', 1)
    gogo = gogo.replace("int64 ID = 1;", 'int64 ID = 1 [(gogoproto.customname) = "ID"];')
    gogo = gogo.replace("string name = 1;\n}", 'string name = 1 [(gogoproto.moretags) = "x", deprecated = true];\n}')
    stripped = gen.strip_gogo(gogo)
    assert "gogo" not in stripped and "int64 ID = 1;" in stripped
    assert 'string name = 1 [deprecated = true];\n}' in stripped
    assert stripped.replace('string name = 1 [deprecated = true];\n}', "string name = 1;\n}") \
        .replace("package v1;\n\n", "package v1;\n", 1) == proto


def test_generated_code_names_the_package_as_installed():
    """protoc names the modules by their folder; the wheel installs them under ``lockstep.``: the checked-in code
    (as ``make proto`` writes it) says the installed names, in its imports and in its messages' module."""
    gen = generator()
    dotted = ".".join(gen.PACKAGE_PATH)
    for name in gen.OUTPUTS:
        checked_in = (PACKAGE / name).read_text().split("\n", 2)[2]     # without the two header lines
        as_protoc_wrote_it = checked_in.replace(f"lockstep.{dotted}", dotted)
        assert as_protoc_wrote_it != checked_in, f"{name}: names no module of its package"
        assert gen.installed_names(as_protoc_wrote_it, gen.PACKAGE_PATH) == checked_in, f"{name}: run make proto"


def pods() -> list[SimPod]:
    return [
        SimPod("ml-team", "llama-node-0-0", "node00", (SimContainer("trainer", (U0, U1)),
                                                        SimContainer("sidecar"))),
        SimPod("ml-team", "mig-pod", "node00", (SimContainer("c", (MIG,), "nvidia.com/mig-1g.10gb"),)),
        SimPod("infra", "rdma-only", "node00", (SimContainer("c", ("hca0",), "rdma/hca_shared_devices_a"),)),
    ]


def test_list_returns_the_gpus_each_container_holds(socket_dir):
    with Kubelet(socket_dir / "kubelet.sock", pods):
        client = PodResourcesClient(socket_dir / "kubelet.sock", timeout_s=5)
        try:
            assert client.list() == [ContainerGpus("ml-team", "llama-node-0-0", "trainer", (U0, U1)),
                                     ContainerGpus("ml-team", "mig-pod", "c", (MIG,))]
        finally:
            client.close()


def test_a_missing_or_dead_socket_fails_clearly_and_a_restarted_kubelet_is_found_again(socket_dir):
    sock = socket_dir / "kubelet.sock"
    client = PodResourcesClient(sock, timeout_s=2)
    with pytest.raises(KubeletUnavailable, match="socket .*kubelet.sock not found"):
        client.list()
    with Kubelet(sock, pods):
        assert len(client.list()) == 2
    sock.touch()   # a stale socket file nobody listens on (a kubelet that died without cleaning up)
    with pytest.raises(KubeletUnavailable, match="UNAVAILABLE"):
        client.list()
    with Kubelet(sock, lambda: pods()[:1]):       # restarted: a new socket at the same path
        # found again by a later scrape: the channel may still be in gRPC's reconnect backoff from the refusal
        found: list[str] = []

        def listed() -> bool:
            try:
                found[:] = [c.pod for c in client.list()]
            except KubeletUnavailable:
                return False
            return True
        wait_on(listed, 30, "the restarted kubelet found again", every=0.1)
        assert found == ["llama-node-0-0"]
    client.close()


def test_device_ids_resolve_to_the_collectors_gpus():
    """GPU 0 whole; GPU 1 in MIG mode: GPU instance 2 holds one MIG device (NVML slot 0), GPU instance 3
    two compute instances (slots 1 and 2)."""
    migs = (MigDevice(0, 2, 0, MIG, "1g.10gb"), MigDevice(1, 3, 0, MIG_CI0, "1c.2g.20gb"),
            MigDevice(2, 3, 1, MIG_CI1, "1c.2g.20gb"))
    refs = device_refs([(0, U0, ()), (1, U1, migs)])
    gpu0, mig = DeviceRef("0", "", U0), DeviceRef("1", "2", MIG)
    assert resolve(U0, refs) == resolve(f"{U0}::3", refs) == gpu0          # a time-sliced replica
    assert resolve("0", refs) == gpu0                                       # --device-id-strategy=index
    assert resolve("nvidia0", refs) == resolve("nvidia0/vgpu1", refs) == gpu0   # GKE, GKE GPU sharing
    assert resolve(MIG, refs) == resolve(f"{MIG}::1", refs) == mig          # a MIG device: parent index, own UUID
    assert resolve(f"MIG-{U1}/2/0", refs) == mig                            # before R470
    assert resolve("1:0", refs) == mig                                      # by index: NVML slot 0 of GPU 1
    assert resolve("nvidia1/gi2", refs) == resolve("nvidia1/gi2/vgpu0", refs) == mig    # GKE: the instance's device
    assert resolve("nvidia1/gi3", refs) == DeviceRef("1", "3", "")          # two compute instances: which, unsaid
    # what NVML doesn't list (yet), or everything where the GPU backend gave no answer: what the id says
    assert resolve(MIG.replace("a", "f"), refs) == DeviceRef("", "", MIG.replace("a", "f"))
    assert resolve("1:5", refs) == DeviceRef("1", "", "")                   # never the parent GPU's UUID
    assert resolve("nvidia1/gi9", refs) == DeviceRef("1", "9", "")
    assert resolve("7", {}) == DeviceRef("7", "", "")
    assert resolve("weird", refs) == DeviceRef("", "", "")
