"""Which exported counters a replica continues for a job (``lockstep.analytics.service.resume``); the service test
proves the whole restart against a real Prometheus."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from lockstep.analytics.service import resume as resume_module
from lockstep.analytics.service.resume import counters_from, resume
from lockstep.stack import require_binary, start_prometheus


def test_resumed_counters_come_from_the_exporter_that_accounted_furthest():
    def series(name, value, instance, **labels):
        return {"metric": {"__name__": name, "job_id": "7", "job": "lockstep-analytics", "instance": instance,
                           **labels}, "value": [1000.0, str(value)]}

    result = [series("lockstep_job_accounted_until_timestamp_seconds", 500, "old:9842"),
              series("lockstep_job_allocated_gpu_seconds_total", 10, "old:9842"),
              series("lockstep_job_accounted_until_timestamp_seconds", 900, "new:9842"),
              series("lockstep_job_allocated_gpu_seconds_total", 40, "new:9842"),
              series("lockstep_job_lost_gpu_seconds_total", 3, "new:9842", cause="checkpoint"),
              {"metric": {"job_id": "7"}, "value": [1000.0, "8"]}]   # not an answer to the query: ignored
    counters = counters_from(result)
    assert (counters.accounted_until, counters.allocated) == (900, 40)
    assert counters.lost["checkpoint"] == 3 and counters.lost["straggler"] == 0   # a cause not exported: 0
    assert counters_from(result[-1:]) is None
    assert counters_from([series("lockstep_job_accounted_until_timestamp_seconds", 900, "x")]) is None


def test_checkpoints_continue_with_the_last_one_so_a_window_over_it_counts_it_once():
    """A replica restarting beside a job continues its checkpoint counters, and the last checkpoint's figures
    and target: the first window it scores holds that checkpoint again, and counts only the later one."""
    def series(name, value, **labels):
        return {"metric": {"__name__": name, "job_id": "7", "job": "lockstep-analytics", "instance": "a:9842",
                           **labels}, "value": [1000.0, repr(float(value))]}

    before = [series("lockstep_job_accounted_until_timestamp_seconds", 900),
              series("lockstep_job_allocated_gpu_seconds_total", 40),
              series("lockstep_job_checkpoints_total", 3),
              series("lockstep_job_checkpoint_seconds_total", 90.5),
              series("lockstep_job_checkpoint_written_bytes_total", 3e12),
              series("lockstep_job_checkpoint_last_start_timestamp_seconds", 700.25),
              series("lockstep_job_checkpoint_last_duration_seconds", 30.125),
              series("lockstep_job_checkpoint_last_bytes", 1e12),
              series("lockstep_job_checkpoint_last_bandwidth_bytes_per_second", 3.3e10),
              series("lockstep_job_checkpoint_last_target_info", 1, mount="/lustre", fstype="lustre")]
    counters = counters_from(before)
    assert (counters.checkpoints, counters.checkpoint_seconds, counters.checkpoint_bytes) == (3, 90.5, 3e12)
    assert counters.last_checkpoint == {"start_timestamp": 700.25, "duration_s": 30.125, "bytes": 1e12,
                                        "bandwidth_bytes_per_second": 3.3e10, "mount": "/lustre", "fstype": "lustre"}
    window = [{"complete": True, "start_timestamp": 700.25, "duration_s": 30.125, "bytes": 1e12,
               "bandwidth_bytes_per_second": 3.3e10},
              {"complete": True, "start_timestamp": 940.0, "duration_s": 20.0, "bytes": 5e11,
               "bandwidth_bytes_per_second": 2.5e10}]
    counters.add_checkpoints(window)
    assert (counters.checkpoints, counters.checkpoint_seconds, counters.checkpoint_bytes) == (4, 110.5, 3e12 + 5e11)

    # an earlier target still within the lookback: which was last is not known, so none is named
    two = counters_from(before + [series("lockstep_job_checkpoint_last_target_info", 1, mount="/nfs", fstype="nfs4")])
    assert "mount" not in two.last_checkpoint and two.last_checkpoint["start_timestamp"] == 700.25
    # exported before any checkpoint ended: none counted, none to skip
    fresh = counters_from(before[:2])
    assert (fresh.checkpoints, fresh.last_checkpoint) == (0, None)
    fresh.add_checkpoints(window)
    assert fresh.checkpoints == 2


@pytest.mark.integration
async def test_one_query_per_batch_of_jobs_finds_each_jobs_own_counters_in_a_real_prometheus(
        stack, tmp_path: Path, monkeypatch) -> None:
    """Jobs are asked for in batches, as regex alternatives: Slurm's ``4242+0`` and a dotted name must
    match themselves only (unescaped, ``+`` and ``.`` are regex operators), and each job gets its own
    counters back. Real Prometheus, filled with promtool."""
    at = float(int(time.time()) - 600)
    exported = {"4242+0": (100, 7), "a.b": (200, 8), "axb": (300, 9), "7": (400, 10)}
    lines = []
    for job_id, (allocated, until) in exported.items():
        labels = f'job="lockstep-analytics",instance="replica-a:9842",job_id="{job_id}"'
        lines += [f"lockstep_job_allocated_gpu_seconds_total{{{labels}}} {allocated} {at:.3f}",
                  f"lockstep_job_accounted_until_timestamp_seconds{{{labels}}} {until} {at:.3f}"]
    scraped = tmp_path / "scraped.om"
    scraped.write_text("\n".join(lines) + "\n# EOF\n")
    promtool = subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                               str(scraped), str(tmp_path / "prom" / "data")], capture_output=True, text=True)
    assert promtool.returncode == 0, promtool.stderr
    store = stack.add(start_prometheus({"global": {}, "scrape_configs": []}, tmp_path / "prom"))

    monkeypatch.setattr(resume_module, "BATCH", 2)   # four jobs: two queries
    async with aiohttp.ClientSession() as session:
        found = await resume(session, store.url, ["4242+0", "a.b", "7", "never-exported"], at + 60, 3600, 30)
    assert {job_id: (c.allocated, c.accounted_until) for job_id, c in found.items()} == {
        "4242+0": (100, 7), "a.b": (200, 8), "7": (400, 10)}
