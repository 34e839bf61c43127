"""Fixtures of the node agent's tests: a network namespace of the test's own (the PFC collector's ioctl
source and the ethtool parser read real veth devices in it)."""
from __future__ import annotations

import subprocess
import uuid

import pytest

from lockstep.stack import require_binary
from tests.helpers.needs import platform_lacks


@pytest.fixture
def netns():
    """A network namespace of the test's own holding a veth pair, lsa0 and lsb0 (4 queues each), up."""
    for tool in ("ip", "ethtool"):
        require_binary(tool)
    name = f"lockstep-test-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        platform_lacks(f"cannot create a network namespace here (needs CAP_SYS_ADMIN): {made.stderr.strip()}")
    try:
        queues = ["numrxqueues", "4", "numtxqueues", "4"]
        subprocess.run(["ip", "-n", name, "link", "add", "lsa0", *queues, "type", "veth", "peer", "name", "lsb0",
                        *queues], check=True, capture_output=True, timeout=30)
        subprocess.run(["ip", "-n", name, "link", "set", "lsa0", "up"], check=True, capture_output=True)
        subprocess.run(["ip", "-n", name, "link", "set", "lsb0", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
