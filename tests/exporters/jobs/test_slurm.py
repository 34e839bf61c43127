"""Slurm GPU→job mapping: the prolog/epilog in deploy/slurm/ (run for real with bash) and the
``jobs`` collector reading what they write."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lockstep.exporters.collectors.jobs import SlurmSource, jobs_collector, parse_mapping
from lockstep.exporters.readfile import read_text
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES
from tests.helpers.slurm import run_script

FIXTURE = FIXTURES / "gpu/node00/gpus.json"
UUID1 = "GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001"


def listing(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.iterdir()) if not p.name.startswith(".")}


@pytest.mark.integration
def test_prolog_and_epilog_maintain_the_mapping(tmp_path):
    jobs = tmp_path / "node00/gpu-jobs"
    assert run_script("prolog-gpu-jobs.sh", {"SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "0,1",
                                             "SLURM_JOB_USER": "alice"}, tmp_path).returncode == 0
    # Newer Slurm: UUIDs in CUDA_VISIBLE_DEVICES, mapped to indices through nvidia-smi.
    assert run_script("prolog-gpu-jobs.sh", {"SLURM_JOB_ID": "4343", "CUDA_VISIBLE_DEVICES": UUID1,
                                             "SLURM_JOB_USER": "bob"}, tmp_path).returncode == 0
    assert listing(jobs) == {"0": "4242\n", "1": "4242\n4343\n"}
    assert listing(tmp_path / "node00/gpu-jobs-users") == {"4242": "alice\n", "4343": "bob\n"}
    assert run_script("epilog-gpu-jobs.sh", {"SLURM_JOB_ID": "4242"}, tmp_path).returncode == 0
    assert listing(jobs) == {"1": "4343\n"}
    assert listing(tmp_path / "node00/gpu-jobs-users") == {"4343": "bob\n"}


@pytest.mark.integration
def test_prolog_never_fails_the_job(tmp_path):
    result = run_script("prolog-gpu-jobs.sh", {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "GPU-ffff"}, tmp_path)
    assert result.returncode == 0 and "cannot map GPU 'GPU-ffff'" in result.stderr


def test_parse_mapping_ignores_non_gpu_files():
    assert [(m.gpu, m.job_id) for m in parse_mapping({"3": "11\n\n12\n", "README": "x", ".3.11": "11"})] == \
        [("3", "11"), ("3", "12")]


def test_collector_joins_index_and_uuid_files(tmp_path, golden):
    node = tmp_path / "node00"
    (node / "gpu-jobs").mkdir(parents=True)
    (node / "gpu-jobs-users").mkdir()
    shutil.copy(FIXTURE, node / "gpus.json")
    (node / "gpu-jobs" / "0").write_text("4242\n")
    (node / "gpu-jobs" / UUID1).write_text("4343\n")      # written by a dcgm-style UUID prolog
    (node / "gpu-jobs-users" / "4242").write_text("alice\n")
    collector = jobs_collector(exporter_config(f"--sim.node-root={node}"))
    families: dict = {}
    Encoder().add(families, collector.collect())
    golden("gpu/jobs.prom", render_text(families))


def test_collector_without_directory_yields_nothing(tmp_path):
    (tmp_path / "n").mkdir()
    assert list(jobs_collector(exporter_config(f"--sim.node-root={tmp_path / 'n'}")).collect()) == []


def test_broken_gpu_state_leaves_uuid_empty_but_keeps_the_mapping(tmp_path):
    node = tmp_path / "node00"
    (node / "gpu-jobs").mkdir(parents=True)
    (node / "gpus.json").write_text('{"version": 1, "gpus": [')  # truncated mid-write by a broken tool
    (node / "gpu-jobs" / "3").write_text("4242\n")
    samples = list(jobs_collector(exporter_config(f"--sim.node-root={node}")).collect())
    assert [(s.labels, s.value) for s in samples] == [(("3", "", "4242", "", "", "", "", "", "slurm"), 1.0)]


def test_a_job_id_cannot_read_outside_the_user_directory(tmp_path):
    node = tmp_path / "node00"
    (node / "gpu-jobs").mkdir(parents=True)
    (node / "gpu-jobs-users").mkdir()
    (tmp_path / "secret").write_text("root-password\n")
    (node / "gpu-jobs" / "0").write_text("../../secret\n")
    (node / "gpu-jobs" / "1").write_text("4242_7\n")
    (node / "gpu-jobs-users" / "4242_7").write_text("bob\n")
    samples = {s.labels[0]: s.labels[2:4] for s in jobs_collector(exporter_config(f"--sim.node-root={node}")).collect()}
    assert samples == {"0": ("../../secret", ""), "1": ("4242_7", "bob")}


def test_uuid_lookup_is_not_retried_on_every_scrape(tmp_path):
    from lockstep.exporters.collectors.jobs import JobsCollector

    (tmp_path / "gpu-jobs").mkdir()
    (tmp_path / "gpu-jobs" / "0").write_text("1\n")
    calls = []
    collector = JobsCollector(SlurmSource(tmp_path / "gpu-jobs", tmp_path / "users"), None,
                              lambda: calls.append(1) or {})
    for _ in range(5):
        assert len(list(collector.collect())) == 1
    assert calls == [1]


def test_a_job_on_every_gpu_has_its_user_file_read_once_per_scrape(tmp_path, monkeypatch):
    from lockstep.exporters.collectors import jobs
    from lockstep.exporters.jobs import slurm

    (tmp_path / "gpu-jobs").mkdir()
    (tmp_path / "users").mkdir()
    for gpu in range(8):
        (tmp_path / "gpu-jobs" / str(gpu)).write_text("4242\n")
    (tmp_path / "users" / "4242").write_text("alice\n")
    read = []
    monkeypatch.setattr(slurm, "read_text", lambda path: read.append(path) or read_text(path))
    source = slurm.SlurmSource(tmp_path / "gpu-jobs", tmp_path / "users")
    samples = list(jobs.JobsCollector(source, None, lambda: {}).collect())
    assert sorted(s.labels[:4] for s in samples) == [(str(g), "", "4242", "alice") for g in range(8)]
    assert read.count(str(tmp_path / "users" / "4242")) == 1


@pytest.mark.integration
def test_one_unreadable_mapping_file_loses_only_that_gpu(tmp_path):
    import subprocess
    import sys

    mapping = tmp_path / "gpu-jobs"
    mapping.mkdir()
    (mapping / "0").write_text("4242\n")
    (mapping / "1").write_text("4343\n")
    (mapping / "1").chmod(0)
    # root reads anything: run the collector without the capability that bypasses file permissions
    code = ("from pathlib import Path; from lockstep.exporters.collectors.jobs import JobsCollector, SlurmSource; "
            f"c = JobsCollector(SlurmSource(Path({str(mapping)!r}), Path({str(tmp_path / 'users')!r})), None, "
            "lambda: {}); "
            "print(sorted((s.labels[0], s.labels[2]) for s in c.collect()))")
    argv = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        argv = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[('0', '4242')]"


def test_an_index_file_and_a_uuid_file_for_one_gpu_give_one_series(tmp_path):
    """Before: both files yielded ``lockstep_gpu_job_info{gpu="1",uuid=UUID1,job_id="4242"}``: a
    duplicate line that Prometheus rejects, losing the whole scrape."""
    node = tmp_path / "node00"
    (node / "gpu-jobs").mkdir(parents=True)
    shutil.copy(FIXTURE, node / "gpus.json")
    (node / "gpu-jobs" / "1").write_text("4242\n")
    (node / "gpu-jobs" / UUID1).write_text("4242\n")
    collector = jobs_collector(exporter_config(f"--sim.node-root={node}", "--node.name=node00"))
    families: dict = {}
    Encoder().add(families, collector.collect())
    lines = [line for line in render_text(families).splitlines() if line.startswith("lockstep_gpu_job_info{")]
    assert len(lines) == 1 and f'uuid="{UUID1}"' in lines[0] and 'gpu="1"' in lines[0], lines
