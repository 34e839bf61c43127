"""The simulator's realistic noise against real data: the per-iteration spread of step times across
the workers of 100 Alibaba PAI training jobs (tests/fixtures/pai/coefficient_variation.csv).

Calibration is checked as a shape, not one number: the table the simulator draws from is the data's
deciles; jobs simulated like PAI's (10 workers, ``step_cov: pai``) give a distribution of per-job
CoV that a two-sample KS test cannot tell from the data's, whose quartiles sit where the data's do;
and within a job the CoV wanders from iteration to iteration as much as it does on PAI.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from lockstep.simulator.model import Model
from lockstep.simulator.noise import NONE, PAI_COV_DECILES, REALISTIC
from lockstep.simulator.scenario import parse_scenario
from tests.helpers.paths import FIXTURES

PAI = FIXTURES / "pai/coefficient_variation.csv"
GROUPS = 0.2       # a job whose median CoV is above this has worker groups (modelled apart: noise.groups)
JOBS = 60


@pytest.fixture(scope="module")
def pai() -> pd.DataFrame:
    cov = pd.read_csv(PAI, index_col=0)
    return cov[cov.median(axis=1) <= GROUPS]


def _job(seed: int, **noise) -> object:
    """A job shaped like PAI's: 10 workers (2 nodes of 5), 5 minutes, no fault."""
    return parse_scenario({"name": "pai-like", "seed": seed, "duration_s": 300, "sample_period_s": 5,
                           "cluster": {"nodes": 2, "gpus_per_node": 5},
                           "job": {"job_id": "1", "nodes": 2, "step_time_s": 1.5},
                           "noise": {"missed_scrapes": 0, **noise}}, "<pai-like>")


def _iteration_covs(scenario) -> np.ndarray:
    """σ/μ of the ranks' last step time (``lockstep_rank_step_seconds``) across the job, per sample."""
    out = [s.rank_busy_s.std() / s.rank_busy_s.mean() for s in Model(scenario).states(scenario.ticks)]
    return np.array(out[1:])


@pytest.fixture(scope="module")
def simulated() -> list[np.ndarray]:
    return [_iteration_covs(_job(seed, step_cov="pai")) for seed in range(JOBS)]


def test_the_drawn_table_is_the_data(pai):
    assert np.percentile(pai.median(axis=1), np.arange(0, 101, 10)) == pytest.approx(PAI_COV_DECILES, abs=6e-5)


@pytest.mark.slow
def test_per_job_spread_has_the_pai_distribution(pai, simulated):
    from scipy.stats import ks_2samp

    real, sim = pai.median(axis=1).to_numpy(), np.array([np.median(c) for c in simulated])
    assert ks_2samp(sim, real).pvalue > 0.05
    for q in (0.25, 0.5, 0.75):
        assert np.quantile(sim, q) == pytest.approx(np.quantile(real, q), rel=0.2), q


@pytest.mark.slow   # 60 simulated jobs (the fast loop keeps one: test_the_default_is_the_median_pai_job)
def test_the_spread_wanders_within_a_job_as_on_pai(pai, simulated):
    """(q75 - q25) / median of a job's per-iteration CoV, the median over jobs: 0.36 on PAI."""
    def wander(covs) -> float:
        return float(np.median([(np.nanquantile(c, 0.75) - np.nanquantile(c, 0.25)) / np.nanmedian(c) for c in covs]))

    assert wander(simulated) == pytest.approx(wander([row.dropna().to_numpy() for _, row in pai.iterrows()]), rel=0.25)


def test_the_default_is_the_median_pai_job():
    assert np.median(_iteration_covs(_job(1))) == pytest.approx(PAI_COV_DECILES[5], rel=0.15)


def test_noise_none_is_the_identical_ranks():
    scenario = dataclasses.replace(_job(1), noise=NONE)
    assert (_iteration_covs(scenario) == 0).all() and REALISTIC != NONE
