"""The generated gNMI code matches the upstream protos checked in beside it (``make proto`` was run)."""
from __future__ import annotations

import hashlib
import re

import pytest

from lockstep.exporters.third_party.gnmi import gnmi_pb2, gnmi_pb2_grpc
from tests.helpers.paths import REPO

GNMI = REPO / "exporters" / "third_party" / "gnmi"


@pytest.mark.parametrize(("generated", "proto"), [("gnmi_pb2.py", "gnmi.proto"), ("gnmi_pb2_grpc.py", "gnmi.proto"),
                                                  ("gnmi_ext_pb2.py", "gnmi_ext.proto")])
def test_generated_code_names_the_sha256_of_its_proto(generated: str, proto: str) -> None:
    header = (GNMI / generated).read_text().splitlines()[1]
    found = re.search(r"sha256 ([0-9a-f]{64})", header)
    assert found, header
    assert found.group(1) == hashlib.sha256((GNMI / proto).read_bytes()).hexdigest()


def test_the_proto_is_upstreams_with_its_licence_header() -> None:
    text = (GNMI / "gnmi.proto").read_text()
    assert "Licensed under the Apache License, Version 2.0" in text
    assert 'import "github.com/openconfig/gnmi/proto/gnmi_ext/gnmi_ext.proto";' in text  # not rewritten here


def test_the_service_and_subscribe_messages_are_there() -> None:
    assert gnmi_pb2.DESCRIPTOR.package == "gnmi"
    assert hasattr(gnmi_pb2_grpc, "gNMIStub") and hasattr(gnmi_pb2_grpc, "gNMIServicer")
    mode = gnmi_pb2.SubscriptionList.Mode
    assert mode.Name(gnmi_pb2.SubscriptionList.STREAM) == "STREAM"
    assert gnmi_pb2.SubscriptionMode.Name(gnmi_pb2.SAMPLE) == "SAMPLE"
