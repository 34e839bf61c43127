"""``lockstep.analytics.service.config``: shards that split jobs stably, and the service's settings validated."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from lockstep.analytics.service.config import Shard, add_serve_flags, parse_shard


@pytest.mark.integration
def test_shards_split_jobs_stably_and_completely():
    jobs = [str(i) for i in range(1000, 1200)]
    owners = [[j for j in jobs if Shard(i, 3).owns(j)] for i in range(3)]
    assert sorted(sum(owners, [])) == sorted(jobs) and all(30 < len(o) < 110 for o in owners)
    # the same split in another interpreter (Python's own str hash is salted per process)
    code = ("from lockstep.analytics.service.config import Shard; "
            "print([str(j) for j in range(1000, 1200) if Shard(1, 3).owns(str(j))])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "random"}, check=True).stdout
    assert other.strip() == str(owners[1])
    assert parse_shard("1/3") == Shard(1, 3)
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError):
            parse_shard(bad)


@pytest.mark.parametrize("field", ["interval_s", "window_s", "step_s", "timeout_s"])
def test_service_durations_must_be_finite(field):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match=field):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", **{field: float("inf")})


def test_a_window_shorter_than_the_interval_is_refused():
    """Refreshes 60 s apart scoring 30 s each would leave half of every job unscored and uncounted."""
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match=r"--window \(30.0s\) must be at least --interval \(60.0s\)"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", interval_s=60.0, window_s=30.0)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", interval_s=60.0, window_s=60.0).window_s == 60.0


@pytest.mark.parametrize("bad", [0, 181])
def test_refetch_steps_must_be_at_least_one_and_within_the_window(bad):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match="--refetch-steps"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", refetch_steps=bad)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", refetch_steps=180).refetch_steps == 180


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_resume_lookback_must_be_zero_or_a_positive_finite_time(bad):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match="--resume-lookback"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", resume_lookback_s=bad)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", resume_lookback_s=0.0).resume_lookback_s == 0.0


@pytest.mark.parametrize("bad", [-1.0, 451.0, float("nan")])
def test_book_after_must_be_within_half_the_window(bad):
    """A sample booked once older than half the window could leave the held window before it is booked."""
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match=r"--book-after must be from 0 to half of --window \(450s\)"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", book_after_s=bad)


def test_samples_wait_90_s_or_half_a_short_window_unless_told():
    from lockstep.analytics.service.config import ServiceConfig, config_from_args
    from lockstep.analytics.service.refresh import Refresher

    url = "http://127.0.0.1:9090"
    assert ServiceConfig(prometheus_url=url).settle_s == 90.0
    assert ServiceConfig(prometheus_url=url, interval_s=1.0, window_s=60.0).settle_s == 30.0
    assert ServiceConfig(prometheus_url=url, book_after_s=0.0).settle_s == 0.0
    assert Refresher(None, ServiceConfig(prometheus_url=url, book_after_s=45.0))._settle_s == 45.0
    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    assert config_from_args(parser.parse_args(["--prometheus-url", url, "--book-after", "12"])).settle_s == 12.0


def test_a_window_shorter_than_a_slowdowns_baseline_is_advised_against_at_start():
    from lockstep.analytics.scoring.slowdown import BASELINE_S
    from lockstep.analytics.service.config import ServiceConfig

    url = "http://127.0.0.1:9090"
    assert ServiceConfig(prometheus_url=url).advice() == []
    assert ServiceConfig(prometheus_url=url, window_s=BASELINE_S).advice() == []
    (line,) = ServiceConfig(prometheus_url=url, window_s=300.0).advice()
    assert line.startswith("--window 300s is shorter than a job-wide slowdown's baseline (600s)")
