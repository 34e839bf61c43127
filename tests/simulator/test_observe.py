"""The job's cgroup I/O counters (``simulator.observe.job_io``): a step's input wait is what is left of it after
compute and the collective, which rounding can leave a hair below zero; the pressure counters never move back."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lockstep.simulator import observe


@pytest.mark.parametrize("wait", [-1e-17, -1e-12, float("nan")])
def test_a_wait_rounded_below_zero_adds_nothing_to_the_pressure_counters(wait):
    tick = SimpleNamespace(io_wait=np.full(8, wait), steps=3.0, step_s=1.5)
    node = {k: np.zeros(2, np.int64) for k in ("nvme_read_sectors", "nvme_write_sectors", "nvme_reads", "nvme_writes")}
    out = observe.job_io(node, tick, np.array([1, 1]), 5.0)
    assert out["job_io_full_us"].tolist() == [0, 0]
    assert (out["job_io_some_us"] >= 0).all()


def test_a_wait_of_a_fifth_of_the_interval_is_a_fifth_of_it_in_microseconds():
    tick = SimpleNamespace(io_wait=np.full(8, 0.2), steps=3.0, step_s=1.0)
    node = {k: np.zeros(1, np.int64) for k in ("nvme_read_sectors", "nvme_write_sectors", "nvme_reads", "nvme_writes")}
    assert observe.job_io(node, tick, np.array([1]), 5.0)["job_io_full_us"].tolist() == [1_000_000]
