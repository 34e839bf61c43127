"""Scenario files: the shipped ones load; bad ones are rejected naming file, line, field and reason,
and nothing is written."""
from __future__ import annotations

import pytest

from lockstep.cli import main
from lockstep.simulator.scenario import FAULT_KINDS, load_scenario
from tests.helpers.paths import REPO

SCENARIOS = REPO / "simulator" / "scenarios"

GOOD = """\
name: t
seed: 1
duration_s: 100
sample_period_s: 5
cluster: {nodes: 2, gpus_per_node: 8, nodes_per_rack: 2}
job:
  job_id: "1"
  nodes: 2
  step_time_s: 1.5
faults:
  - {kind: hang, start_s: 10, end_s: 20}
"""

BAD = [
    # (replace this, with that, expected line, expected field, reason fragment)
    # A job id names files under --root: before, "../../x" wrote gpu-jobs-users/../../x outside it.
    ('job_id: "1"', 'job_id: "../../x"', 7, "job.job_id", "must be a Slurm job id"),
    ('job_id: "1"', 'job_id: "../../x"', 7, "job.job_id", "must be a Slurm job id"),
    ("{kind: hang, start_s: 10, end_s: 20}", "{kind: meltdown, start_s: 10, end_s: 20}", 11, "faults[0].kind",
     "must be one of gpu_throttle"),
    ("{kind: hang, start_s: 10, end_s: 20}", "{kind: slow_node, node: node07, start_s: 10, end_s: 20}", 11,
     "faults[0].node", "node 'node07' does not exist"),
    ("{kind: hang, start_s: 10, end_s: 20}", "{kind: hang, start_s: 30, end_s: 20}", 11, "faults[0].end_s",
     "must be after start_s"),
    ("{kind: hang, start_s: 10, end_s: 20}", "{kind: hang, start_s: 10, end_s: 20, severity: 3}", 11,
     "faults[0].severity", "unknown key"),
    ("  step_time_s: 1.5\n", "  step_time_s: 1.5\n  step_tme_s: 2\n", 10, "job.step_tme_s", "unknown key"),
    ("{kind: hang, start_s: 10, end_s: 20}", "{kind: gpu_throttle, node: node01, gpu: 8, start_s: 10, end_s: 20}",
     11, "faults[0].gpu", "must be 0..7"),
    ("  nodes: 2\n", "  nodes: [node00, node05]\n", 8, "job.nodes", "node 'node05' does not exist"),
    ("duration_s: 100", "duration_s: -5", 3, "duration_s", "must be > 0"),
]


def test_shipped_scenarios_load() -> None:
    loaded = {p.stem: load_scenario(p) for p in SCENARIOS.glob("*.yaml")}
    kinds = {f.kind for s in loaded.values() for f in s.faults}
    assert kinds == set(FAULT_KINDS)
    assert {"baseline", "demo", "thermal-straggler", "checkpoint"} <= set(loaded)
    assert not loaded["baseline"].faults and loaded["baseline"].job.checkpoint is None
    demo = loaded["demo"]
    assert (demo.cluster.nodes, demo.cluster.gpus_per_node) == (16, 8)


def test_contract_example_loads_with_its_values() -> None:
    s = load_scenario(SCENARIOS / "thermal-straggler.yaml")
    assert (s.name, s.seed, s.duration_s, s.sample_period_s) == ("thermal-straggler", 7, 1800, 5)
    assert s.job.checkpoint.write_bytes == 2.0e12 and s.job.storage_read_bytes_per_step == 4.0e9
    assert len(s.job.nodes) == 16 and s.job.job_id == "4242"
    throttle = s.faults[0]
    assert (throttle.node, throttle.gpu, throttle.clock_factor, throttle.reason) == ("node05", 3, 0.7, "thermal")
    assert [f.kind for f in s.faults] == ["gpu_throttle", "slow_node", "pause_storm", "link_flap",
                                          "storage_starvation", "hang", "xid"]


@pytest.mark.parametrize("command", ["run", "series"])
@pytest.mark.parametrize("old,new,line,field,reason", BAD)
def test_bad_scenario_is_rejected_and_nothing_written(tmp_path, capsys, command, old, new, line, field, reason) -> None:
    assert old in GOOD
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(old, new))
    out = tmp_path / "out"
    args = ["sim", "run", str(path), "--root", str(out)] if command == "run" else \
        ["sim", "series", str(path), "--out", str(out / "s.parquet")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}: {field}: " in err and reason in err, err
    assert not out.exists()


def test_the_good_variant_is_accepted(tmp_path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert load_scenario(path).faults[0].kind == "hang"


@pytest.mark.parametrize("extra,reason", [(["--duration", "nan"], "--duration"), (["--speed", "nan"], "--speed"),
                                          (["--speed", "inf"], "--speed")])
def test_non_finite_run_flags_are_rejected(tmp_path, capsys, extra, reason) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert main(["sim", "run", str(path), "--root", str(tmp_path / "out"), *extra]) == 2
    assert reason in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["run", "series"])
def test_an_output_path_that_cannot_be_written_is_exit_2_not_a_traceback(tmp_path, capsys, command) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    blocker = tmp_path / "a-file"
    blocker.write_text("")            # DIR/a-file/... cannot be created
    args = ["sim", "run", str(path), "--root", str(blocker / "root"), "--duration", "5"] if command == "run" else \
        ["sim", "series", str(path), "--out", str(blocker / "s.parquet")]
    assert main(args) == 2
    assert str(blocker) in capsys.readouterr().err


@pytest.mark.parametrize("old,new", [("duration_s: 100", "duration_s: .inf"), ("sample_period_s: 5", "sample_period_s: .inf"),
                                     ("sample_period_s: 5", "sample_period_s: nan")])
def test_non_finite_numbers_are_rejected_naming_the_field(tmp_path, capsys, old, new) -> None:
    assert old in GOOD
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(old, new))
    assert main(["sim", "series", str(path), "--out", str(tmp_path / "out" / "s.parquet")]) == 2
    err = capsys.readouterr().err
    assert f"{new.split(':')[0]}: must be a finite number" in err, err
    assert not (tmp_path / "out").exists()


def test_series_onto_a_directory_is_exit_2_and_leaves_no_temp_file(tmp_path, capsys) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    target = tmp_path / "taken.parquet"
    target.mkdir()                    # the rename onto it fails after the frame was written
    assert main(["sim", "series", str(path), "--out", str(target)]) == 2
    assert "taken.parquet" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.yaml", "taken.parquet"]
