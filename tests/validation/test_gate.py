"""The health gate (deploy/gate/lockstep-gate.sh) and its Slurm prolog, run for real with the real
`lockstep validate` and stand-in dcgmi / ib_write_bw / nvidia-smi / scontrol that print real captures."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockstep.validation.store import read_series
from tests.helpers.paths import FIXTURES, REPO

pytestmark = pytest.mark.integration

V = FIXTURES / "validation"
GATE = REPO / "deploy" / "gate" / "lockstep-gate.sh"
PROLOG = REPO / "deploy" / "slurm" / "prolog-validation.sh"
FAKES = {
    # dcgmi: $FAKE_DCGM is the document to print, or "hang"
    "dcgmi": 'echo "$@" >> "$FAKE_LOG.dcgmi"; [ "$FAKE_DCGM" = hang ] && exec sleep 3600; cat "$FAKE_DCGM"',
    # ib_write_bw: the server (no host argument) answers and exits; the client prints the real capture
    "ib_write_bw": 'case "$*" in *localhost*) cat "$FAKE_IB";; esac',
    "nvidia-smi": 'for i in 0 1 2 3 4 5 6 7; do echo $i; done',
    "scontrol": 'printf "%s|" "$@" >> "$FAKE_LOG.scontrol"',
}


@pytest.fixture
def env(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOCKSTEP": str(Path(sys.executable).parent / "lockstep"),
            "LOCKSTEP_RESULTS_DIR": str(tmp_path / "results"), "LOCKSTEP_GATE_HCAS": "mlx5_0",
            "SLURMD_NODENAME": "gpu-07", "LOCKSTEP_NODE": "gpu-07", "FAKE_LOG": str(tmp_path / "log"),
            "FAKE_DCGM": str(V / "dcgm_diag_r3_pass.constructed.json"), "FAKE_IB": str(V / "ib_loopback_8M_size.log"),
            "LOCKSTEP_GATE": str(GATE)}


def run(script: Path, env: dict, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script)], env={**env, **extra}, capture_output=True, text=True, timeout=120)


def latest(env: dict, kind: str, test: str) -> dict:
    return read_series(Path(env["LOCKSTEP_RESULTS_DIR"]) / "gpu-07" / kind / f"{test}@1.json")["latest"]


def drains(env: dict) -> list[str]:
    log = Path(env["FAKE_LOG"] + ".scontrol")
    return log.read_text().split("|")[:-1] if log.exists() else []


def test_a_healthy_node_passes_and_its_results_are_recorded(env):
    out = run(PROLOG, env)
    assert out.returncode == 0, out.stderr
    assert latest(env, "dcgm-diag", "gate-diag-r1")["status"] == "pass"
    ib = latest(env, "perftest", "gate-ib_write_bw_mlx5_0")
    assert ib["status"] == "pass" and ib["figures"]["bw_average_bytes_per_second"] == 24056.72 * (1 << 20)
    assert drains(env) == []


def test_a_failed_diagnostic_drains_the_node_with_the_test_as_reason(env):
    out = run(PROLOG, env, FAKE_DCGM=str(V / "dcgm_diag_r3_fail.constructed.json"))
    assert out.returncode == 1
    assert drains(env) == ["update", "nodename=gpu-07", "state=drain", "reason=lockstep gate failed: diag-r1"]
    assert "memory gpu3" in latest(env, "dcgm-diag", "gate-diag-r1")["message"]


def test_a_lost_gpu_fails_the_gate(env):
    out = run(GATE, env, LOCKSTEP_GATE_DRAIN="none", FAKE_DCGM=str(V / "dcgm_diag_r1_3x.constructed.json"))
    assert out.returncode == 1 and drains(env) == []
    assert "4 GPUs tested, 8 expected" in latest(env, "dcgm-diag", "gate-diag-r1")["message"]


def test_a_hung_diagnostic_times_out_and_drains(env):
    out = run(PROLOG, env, FAKE_DCGM="hang", LOCKSTEP_GATE_DIAG_TIMEOUT="1")
    assert out.returncode == 1 and drains(env)[-1] == "reason=lockstep gate failed: diag-r1"
    assert latest(env, "dcgm-diag", "gate-diag-r1")["status"] == "timeout"


def test_the_prolog_runs_the_gate_once_a_day_while_it_passes(env):
    assert run(PROLOG, env).returncode == 0
    assert run(PROLOG, env).returncode == 0
    assert len(Path(env["FAKE_LOG"] + ".dcgmi").read_text().splitlines()) == 1
    assert run(PROLOG, env, LOCKSTEP_GATE_EVERY_S="0").returncode == 0
    assert len(Path(env["FAKE_LOG"] + ".dcgmi").read_text().splitlines()) == 2
