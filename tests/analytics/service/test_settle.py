"""The loss counters wait for a sample's cost to settle (``LossCounters.add`` with ``until``, ``settle``).

A job-wide slowdown is reported once it lasted, and counted from where it began: the samples of its
first minute read as productive until later samples confirm it. The running service books a sample
once it is ``SETTLE_S`` old, and what still waits when the job ends as last scored."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.service.state import LossCounters
from lockstep.exporters.catalog.enums import LOSS_CAUSES
from tests.helpers.paths import REPO

PERIOD, GPUS = 5.0, 4


@dataclass
class Scored:
    """What the counters read of a scored window: ``slowed`` samples lose a quarter of the job's GPU time to
    a network slowdown."""
    times: np.ndarray
    slowed: np.ndarray

    @property
    def columns(self) -> pd.Index:
        return pd.Index(range(GPUS))

    @property
    def lost(self) -> dict[str, np.ndarray]:
        return {cause: np.zeros(len(self.times)) for cause in LOSS_CAUSES}

    @property
    def imbalance_lost(self) -> np.ndarray:
        return np.zeros(len(self.times))

    @property
    def ledger(self) -> dict[str, dict[str, np.ndarray]]:
        slow = np.where(self.slowed, 0.25 * GPUS * PERIOD, 0.0)
        return {"productive": {"": GPUS * PERIOD - slow}, "slowdown": {"network": slow}}


def window(first: int, last: int, slowed_from: int | None) -> Scored:
    """Samples ``first``..``last`` (times in steps), slowed from ``slowed_from`` on as this window sees it."""
    steps = np.arange(first, last + 1)
    return Scored(steps * PERIOD, steps >= slowed_from if slowed_from is not None else np.zeros(len(steps), bool))


def test_a_slowdown_confirmed_later_is_booked_from_its_start_not_as_productive():
    """A slowdown begins at step 50. The window ending at step 60 does not see it yet (not confirmed); the
    one ending at step 80 labels it from step 50. Booked once 60 s (12 steps) old: steps 50-60 go to the
    slowdown, none of them to productive."""
    settle = 12 * PERIOD
    c = LossCounters()
    first = window(0, 60, None)
    c.add(first, PERIOD, until=first.times[-1] - settle)
    assert c.accounted_until == 48 * PERIOD and c.ledger["slowdown"]["network"] == 0
    assert c.allocated == 48 * GPUS * PERIOD            # step 0 closes the interval before the data
    later = window(20, 80, 50)
    c.add(later, PERIOD, until=later.times[-1] - settle)
    assert c.accounted_until == 68 * PERIOD
    assert c.ledger["slowdown"]["network"] == pytest.approx(19 * 0.25 * GPUS * PERIOD)   # steps 50..68
    assert c.ledger["productive"][""] + c.ledger["slowdown"]["network"] == pytest.approx(c.allocated)


def test_booked_at_once_the_first_window_keeps_the_slowdowns_first_samples_as_productive():
    """The same windows booked without waiting: what the counters did before they waited, and why they wait."""
    c = LossCounters()
    c.add(window(0, 60, None), PERIOD)
    c.add(window(20, 80, 50), PERIOD)
    assert c.ledger["slowdown"]["network"] == pytest.approx(20 * 0.25 * GPUS * PERIOD)   # steps 61..80 only


def test_what_waits_when_the_job_ends_is_booked_as_last_scored():
    c = LossCounters()
    last = window(0, 80, 50)
    c.add(last, PERIOD, until=last.times[-1] - 60)
    assert c.pending is not None and c.accounted_until == 68 * PERIOD
    c.add(window(20, 80, 50), PERIOD, until=last.times[-1] - 60)    # scored again: nothing booked twice
    c.settle()
    assert c.pending is None and c.accounted_until == 80 * PERIOD
    assert c.allocated == 80 * GPUS * PERIOD
    assert c.ledger["slowdown"]["network"] == pytest.approx(31 * 0.25 * GPUS * PERIOD)   # steps 50..80
    assert c.ledger["productive"][""] + c.ledger["slowdown"]["network"] == pytest.approx(c.allocated)
    c.settle()                                                             # twice: nothing more
    assert c.allocated == 80 * GPUS * PERIOD


@pytest.mark.slow
def test_the_live_service_books_a_fabric_slowdown_as_the_truth_has_it():
    """The fabric-slowdown scenario replayed through the service's refresh every minute (``replay``), then
    its end: the slowdown's GPU-seconds within the loss account's tolerance of the truth's. Booked at
    once, its first minute went to productive (12 % short)."""
    from lockstep.analytics.evaluation.evaluate import simulate
    from lockstep.analytics.evaluation.replay import replay
    from lockstep.analytics.evaluation.truthcheck import LOSS_TOLERANCE

    run = simulate(REPO / "simulator/scenarios/fabric-slowdown.yaml")
    job_id = str(run.truth["jobs"][0]["job_id"])
    counters = replay(run.frame, job_id, run.start, run.truth["duration_s"], run.period)
    want = run.truth["loss"]["lost_gpu_seconds"]["network"]
    assert want > 0
    assert abs(counters.ledger["slowdown"]["network"] - want) <= LOSS_TOLERANCE * want
    assert sum(v for by_cause in counters.ledger.values() for v in by_cause.values()) == \
        pytest.approx(counters.allocated)
