"""The peer rule: robust distance from the same model and driver's median, signed worse-positive,
evidence naming the feature, and a verdict that needs persistence and clears with hysteresis."""
import itertools

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.scoring import peers


def fleet(n=16, model="H100", driver="550", clock=None, seed=0):
    rng = np.random.default_rng(seed)
    idx = pd.MultiIndex.from_tuples([(f"{model}-n{i // 8}", str(i % 8)) for i in range(n)], names=["node", "gpu"])
    return pd.DataFrame({"model": model, "driver": driver,
                         "sm_clock": clock if clock is not None else rng.normal(0.9, 0.01, n),
                         "power": rng.normal(1.0, 0.02, n), "thermal": rng.normal(0.0, 5.0, n),
                         "pcie": np.ones(n)}, index=idx)


def test_a_slow_gpu_is_far_below_its_peers_and_named_by_its_clock():
    f = fleet()
    f.iloc[3, f.columns.get_loc("sm_clock")] = 0.3
    dev = peers.deviations(f)
    score = peers.scores(dev)
    assert score.idxmax() == ("H100-n0", "3")
    assert score.max() > 20
    # the other GPUs stay within the ordinary spread of a normal sample
    assert (score.drop(("H100-n0", "3")) < peers.THRESHOLD).all()
    assert list(peers.evidence(dev)) == [("H100-n0", "3")]
    assert set(peers.evidence(dev)[("H100-n0", "3")]) == {"sm_clock"}


def test_only_the_bad_direction_counts():
    f = fleet()
    f.iloc[5, f.columns.get_loc("sm_clock")] = 1.5     # faster than the peers: not a fault
    f.iloc[6, f.columns.get_loc("thermal")] = -60.0    # much cooler: not a fault
    assert peers.scores(peers.deviations(f)).max() < peers.THRESHOLD


def test_identical_peers_use_the_floor_not_zero_spread():
    f = fleet()
    f.iloc[2, f.columns.get_loc("pcie")] = 0.5          # x8 of x16, every other GPU exactly 1.0
    dev = peers.deviations(f)
    assert dev["pcie"].drop(("H100-n0", "2")).abs().max() == 0
    assert dev.loc[("H100-n0", "2"), "pcie"] == pytest.approx(0.5 / 0.01)


def test_peers_are_the_same_model_and_driver_only():
    a = fleet(model="H100", clock=np.full(16, 0.9))
    b = fleet(model="A100", clock=np.full(16, 0.6))     # another model runs lower: not an outlier
    c = fleet(n=4, model="L40S", driver="535", clock=np.array([0.9, 0.9, 0.9, 0.2]))   # too few peers: no score
    dev = peers.deviations(pd.concat([a, b, c]))
    score = peers.scores(dev)
    assert score.loc[a.index.union(b.index)].max() < peers.THRESHOLD
    assert score.loc[c.index].isna().all()


def test_absent_features_are_not_zero():
    f = fleet()
    f["power"] = np.nan
    f.iloc[0, f.columns.get_loc("sm_clock")] = np.nan
    dev = peers.deviations(f)
    assert dev["power"].isna().all()
    assert np.isnan(dev.iloc[0]["sm_clock"])
    assert np.isfinite(peers.scores(dev).iloc[0])   # the GPU is still scored on what it has


def test_degraded_needs_persistence_ignores_idle_and_clears_with_hysteresis():
    v = peers.Verdicts()
    key = ("n0", "1")
    high, low, mid = peers.THRESHOLD + 1, peers.CLEAR - 1, (peers.THRESHOLD + peers.CLEAR) / 2
    step = peers.PERSIST_S / 4
    at = iter(step * i for i in range(100))
    for _ in range(4):
        assert key not in v.update(pd.Series({key: high}), next(at))
    assert key not in v.update(pd.Series({key: np.nan}), next(at))   # idle: no verdict either way
    assert key in v.update(pd.Series({key: high}), next(at))                  # over for PERSIST_S: degraded
    assert key in v.update(pd.Series({key: np.nan}), next(at))                # idle keeps the verdict
    assert key in v.update(pd.Series({key: mid}), next(at))                   # between CLEAR and THRESHOLD: kept
    assert key not in v.update(pd.Series({key: low}), next(at))
    assert key not in v.update(pd.Series({key: high}), next(at))              # a new streak starts from nothing


def test_verdicts_over_a_fleet_follow_the_rule_gpu_by_gpu():
    """Many GPUs at once, scores drawn from every band (idle, under CLEAR, between, over THRESHOLD), a GPU now and
    then missing from a refresh: each refresh's verdicts are those of the rule applied to each GPU on its own."""
    rng = np.random.default_rng(7)
    keys = [(f"n{i // 8}", str(i % 8)) for i in range(40)]
    bands = [np.nan, peers.CLEAR - 1, (peers.CLEAR + peers.THRESHOLD) / 2, peers.THRESHOLD + 1]
    v, since, degraded = peers.Verdicts(), {}, set()
    for step in range(60):
        at = step * peers.PERSIST_S / 3
        present = [k for k in keys if rng.random() > 0.1]
        score = pd.Series([bands[i] for i in rng.choice(4, len(present), p=[0.1, 0.3, 0.2, 0.4])],
                          index=pd.MultiIndex.from_tuples(present, names=["node", "gpu"]), dtype=float)
        for key, value in zip(present, score.to_numpy()):        # the rule, one GPU at a time
            if np.isnan(value):
                continue
            if value >= peers.THRESHOLD:
                since.setdefault(key, at)
                if at - since[key] >= peers.PERSIST_S:
                    degraded.add(key)
            else:
                since.pop(key, None)
                if value < peers.CLEAR:
                    degraded.discard(key)
        assert v.update(score, at) == degraded, step
    assert degraded and len(degraded) < len(keys)


def test_the_thermal_slope_is_the_median_of_every_pair_in_a_group_of_ordinary_size():
    """Theil-Sen over every pair, computed here pair by pair: the slope the thermal feature takes out."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(650, 40, 40), rng.normal(70, 3, 40)
    x[5] = np.nan
    pairs = [(y[j] - y[i]) / (x[j] - x[i]) for i, j in itertools.combinations(range(40), 2)
             if np.isfinite(x[i]) and np.isfinite(x[j])]
    assert peers._slope(x, y) == pytest.approx(float(np.median(pairs)), rel=1e-12)


def test_a_fleet_sized_peer_group_gets_its_slope_from_a_sample_the_same_every_time():
    """A group far larger than SLOPE_PEERS (one model and driver across a big cluster: the pairs of all of it would
    not fit in memory): the slope of its sample is the group's within the noise, outliers and all, and the same on
    every call."""
    rng = np.random.default_rng(4)
    n = 20 * peers.SLOPE_PEERS
    power = rng.normal(650, 40, n)
    temperature = 25 + 0.06 * power + rng.normal(0, 1.0, n)
    temperature[rng.choice(n, n // 50, replace=False)] += 30          # 2 % hot outliers do not tilt it
    slope = peers._slope(power, temperature)
    assert slope == pytest.approx(0.06, abs=0.005)
    assert peers._slope(power, temperature) == slope


def node_temps(n_nodes=4, per_node=8, seed=1):
    """GPUs whose temperature is their node's inlet plus a thermal resistance (4 % slot spread) times power."""
    rng = np.random.default_rng(seed)
    rows = []
    for node in range(n_nodes):
        inlet = 25 + rng.normal(0, 2)
        for g in range(per_node):
            p = rng.normal(600, 30)
            rows.append((f"n{node}", str(g), p, inlet + 0.055 * rng.normal(1, 0.04) * p))
    f = pd.DataFrame(rows, columns=["node", "gpu", "power_w", "temperature_c"]).set_index(["node", "gpu"])
    return f.assign(model="H100", driver="550")


def test_thermal_is_temperature_at_a_given_power_against_the_node():
    f = node_temps()
    base = peers.deviations(f)["thermal"]
    assert base.abs().max() < peers.THRESHOLD
    hot = f.copy()
    hot.loc[("n1", "3"), "temperature_c"] += 15
    assert peers.deviations(hot)["thermal"].idxmax() == ("n1", "3")
    assert peers.deviations(hot).loc[("n1", "3"), "thermal"] > peers.THRESHOLD
    # leaky silicon draws 20 % more and runs warmer for it: not hot at a given power
    leaky = f.copy()
    leaky.loc[("n2", "5"), "power_w"] *= 1.2
    leaky.loc[("n2", "5"), "temperature_c"] += 0.055 * 0.2 * f.loc[("n2", "5"), "power_w"]
    assert peers.deviations(leaky).loc[("n2", "5"), "thermal"] < peers.THRESHOLD
    # a slow neighbour draws far less and runs cool: its node's other GPUs are not made hot
    slow = f.copy()
    slow.loc[("n0", "0"), "power_w"] = 250.0
    slow.loc[("n0", "0"), "temperature_c"] = slow.loc[("n0", "1"), "temperature_c"] - 0.055 * 350
    assert peers.deviations(slow)["thermal"].drop(("n0", "0")).max() < peers.THRESHOLD
    # a warmer inlet warms the whole node: no GPU of it is hot
    inlet = f.copy()
    inlet.loc["n3", "temperature_c"] = (inlet.loc["n3", "temperature_c"] + 8).to_numpy()
    assert peers.deviations(inlet)["thermal"].max() < peers.THRESHOLD


def test_identical_temperatures_are_not_turned_into_outliers_by_rounding():
    f = node_temps()
    f["temperature_c"] = 70.0                      # every GPU reads the same (a 1 C sensor step hides the spread)
    f.loc[("n1", "2"), "temperature_c"] = 71.0     # one step up: not evidence
    assert peers.deviations(f)["thermal"].abs().max() < peers.THRESHOLD
