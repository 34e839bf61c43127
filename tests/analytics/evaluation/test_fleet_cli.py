"""``lockstep analytics evaluate-fleet``: its errors and its exit status."""
import json

from lockstep.cli import main

SMALL = """name: too-few-peers
seed: 1
duration_s: 7200
sample_period_s: 60
models:
  - {model: l40s, nodes: 1, gpus_per_node: 4}
faults:
  - {kind: slow, node: l40s-n00, gpu: 1, clock_factor: 0.5}
"""


def test_a_broken_fleet_file_is_an_error_naming_its_line(tmp_path, capsys):
    bad = tmp_path / "fleet.yaml"
    bad.write_text(SMALL.replace("kind: slow", "kind: sluggish"))
    assert main(["analytics", "evaluate-fleet", str(bad)]) == 2
    assert "fleet.yaml:8: faults[0].kind: must be one of slow, hot, downtrained" in capsys.readouterr().err


def test_a_planted_gpu_without_enough_peers_is_reported_missed_and_fails(tmp_path, capsys):
    path = tmp_path / "fleet.yaml"
    path.write_text(SMALL)
    assert main(["analytics", "evaluate-fleet", str(path), "--json"]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    (planted,) = report["rule"]["planted"]
    assert planted["degraded_s"] is None and not planted["within_budget"]
