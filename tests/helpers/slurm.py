"""The Slurm scripts of deploy/slurm/ run for real with bash, beside a stand-in ``nvidia-smi``."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.paths import REPO

SLURM = REPO / "deploy" / "slurm"


def run_script(name: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    smi = tmp_path / "nvidia-smi"
    if not smi.exists():  # nvidia-smi's output for --query-gpu=index,uuid --format=csv,noheader
        smi.write_text("#!/bin/sh\nprintf '0, GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000000\\n"
                       "1, GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001\\n'\n")
        smi.chmod(0o755)
    full = {"PATH": os.environ["PATH"], "LOCKSTEP_GPU_JOB_DIR": str(tmp_path / "node00/gpu-jobs"),
            "LOCKSTEP_NVIDIA_SMI": str(smi), **env}
    return subprocess.run(["bash", str(SLURM / name)], env=full, capture_output=True, text=True, timeout=30)
