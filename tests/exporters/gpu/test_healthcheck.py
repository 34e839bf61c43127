"""deploy/slurm/epilog-gpu-healthcheck.sh against a real ``lockstep exporter`` process serving a
simulated node: it fails (drains) on every failed validation check and passes on a healthy node."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.helpers.agent import start_exporter
from tests.helpers.paths import FIXTURES, REPO

pytestmark = pytest.mark.integration

SCRIPT = REPO / "deploy/slurm/epilog-gpu-healthcheck.sh"
FIXTURE = FIXTURES / "gpu/node00/gpus.json"


def healthcheck(url: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "LOCKSTEP_AGENT_URL": url, **extra_env}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


def healthy_node() -> dict:
    doc = json.loads(FIXTURE.read_text())
    good = doc["gpus"][0]
    doc["gpus"] = [dict(good, index=i, uuid=good["uuid"][:-1] + str(i), lost=False,
                        p2p={str(p): "ok" for p in range(3) if p != i}) for i in range(3)]
    return doc


def test_healthcheck_drains_on_failed_checks_and_passes_healthy_node(tmp_path, stack):
    bad, good = tmp_path / "bad/node00", tmp_path / "good/node00"
    bad.mkdir(parents=True)
    good.mkdir(parents=True)
    shutil.copy(FIXTURE, bad / "gpus.json")
    (good / "gpus.json").write_text(json.dumps(healthy_node()))
    bad_agent = stack.add(start_exporter(bad, tmp_path / "bad-agent"))
    good_agent = stack.add(start_exporter(good, tmp_path / "good-agent"))

    result = healthcheck(bad_agent.url + "/metrics")
    assert result.returncode == 1, result.stderr
    for reason in ('GPU lost {gpu="2"}', 'P2P status 3 {gpu="1",peer="0"}', 'PCIe link below max width {gpu="1"}',
                   'persistence mode off {gpu="1"}', 'ECC disabled {gpu="1"}'):
        assert reason in result.stderr
    assert 'gpu="0"' not in result.stderr

    result = healthcheck(good_agent.url + "/metrics")
    assert (result.returncode, result.stderr) == (0, "")

    # A PCIe server where cross-socket P2P is "IOH topology not supported" (3) by design: allowed by the
    # site, that status no longer fails, every other check still does.
    result = healthcheck(bad_agent.url + "/metrics", LOCKSTEP_P2P_ALLOWED="0,3")
    assert result.returncode == 1 and "P2P status" not in result.stderr
    assert 'GPU lost {gpu="2"}' in result.stderr and 'ECC disabled {gpu="1"}' in result.stderr


def test_unreachable_agent_is_not_a_node_fault(refused_port):
    result = healthcheck(f"http://127.0.0.1:{refused_port}/metrics")
    assert result.returncode == 0 and "cannot reach" in result.stderr


def test_an_agent_with_basic_auth_is_checked_with_credentials_and_a_refusal_fails(tmp_path, stack):
    """Before: the epilog called the agent without credentials; once basic auth was on it printed
    "skipping" and exited 0, so the GPU health gate was silently off on every node."""
    import bcrypt

    bad = tmp_path / "bad/node00"
    bad.mkdir(parents=True)
    shutil.copy(FIXTURE, bad / "gpus.json")
    hashed = bcrypt.hashpw(b'pa"ss\\word', bcrypt.gensalt(4)).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    agent = stack.add(start_exporter(bad, tmp_path / "agent", f"--web.config.file={tmp_path / 'web.yml'}",
                                     ready=False))
    creds = tmp_path / "creds"
    creds.write_text('prometheus:pa"ss\\word\n')
    result = healthcheck(agent.url + "/metrics", LOCKSTEP_AGENT_CREDENTIALS_FILE=str(creds))
    assert result.returncode == 1 and 'GPU lost {gpu="2"}' in result.stderr  # checked with credentials
    for env in ({}, {"LOCKSTEP_AGENT_CREDENTIALS_FILE": str(tmp_path / "web.yml")}):  # none; wrong ones
        result = healthcheck(agent.url + "/metrics", **env)
        assert result.returncode == 1 and "HTTP 401" in result.stderr and "skipping" not in result.stderr
