"""The simulated fleet: scenario errors by file and line, healthy spread at load, faults from the start."""
import numpy as np
import pytest

from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.simulator.fleet import load_fleet, simulate_fleet

FLEET = """name: t
seed: 3
duration_s: 36000
sample_period_s: 60
models:
  - {model: h100-sxm, nodes: 6, gpus_per_node: 8, drivers: ["550", "535"]}
  - {model: l40s, nodes: 4, gpus_per_node: 4}
busy: {mean_busy_s: 7200, mean_idle_s: 1800}
faults:
  - {kind: slow, node: h100-sxm-n01, gpu: 2, clock_factor: 0.5}
  - {kind: hot, node: h100-sxm-n02, gpu: 3, celsius: 15}
  - {kind: downtrained, node: l40s-n01, gpu: 0, width: 8}
"""


def write(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    return p


def test_an_unknown_gpu_is_rejected_with_its_line(tmp_path):
    p = write(tmp_path, FLEET.replace("node: l40s-n01, gpu: 0", "node: l40s-n01, gpu: 4"))
    with pytest.raises(ConfigError, match=r"fleet.yaml:\d+: faults\[2\].node: no GPU 4"):
        load_fleet(p)


def test_an_unknown_model_and_a_typo_are_rejected(tmp_path):
    with pytest.raises(ConfigError, match="model: must be one of"):
        load_fleet(write(tmp_path, FLEET.replace("model: l40s", "model: b200")))
    with pytest.raises(ConfigError, match="unknown key"):
        load_fleet(write(tmp_path, FLEET.replace("celsius: 15", "celcius: 15")))


def test_healthy_peers_spread_a_little_and_faults_show_whenever_loaded(tmp_path):
    s = simulate_fleet(load_fleet(write(tmp_path, FLEET)))
    assert s.sm_clock.shape == (600, 64)
    assert sorted(set(s.driver)) == ["535", "550", "550.54.15"]
    loaded = s.utilization > 0.8
    col = {k: i for i, k in enumerate(s.gpus)}
    h100 = [i for i, (n, _) in enumerate(s.gpus) if n.startswith("h100")]
    healthy = [i for i in h100 if s.gpus[i] not in {("h100-sxm-n01", "2"), ("h100-sxm-n02", "3")}]
    temp = np.array([np.median(s.temperature[loaded[:, i], i]) for i in healthy if loaded[:, i].any()])
    # cooling differs a few degrees between healthy slots and nodes, never tens
    assert 0.5 < temp.std() < 6
    slow = col[("h100-sxm-n01", "2")]
    ratio = s.sm_clock[loaded[:, slow], slow] / s.sm_clock_max[slow]
    assert loaded[:, slow].any() and np.all(ratio < 0.55)
    down = col[("l40s-n01", "0")]
    assert np.all(s.pcie_width[:, down] == 8) and s.pcie_width_max[down] == 16
    assert np.all(s.pcie_width[:, col[("l40s-n01", "1")]] == 16)
    # the fleet starts in its steady state: some nodes busy, some idle
    assert loaded[0].any() and not loaded[0].all()
