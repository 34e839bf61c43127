"""``lockstep sim run`` and the real ``lockstep storage-exporter`` on the config the simulator writes: the simulated
MinIO, VAST and WEKA (simulator/storagesys.py) answer over their own interfaces and authentication, every target is
up, and between two scrapes VAST's read and write bytes grow with the job's reads and logs (per view too: the reads on
``/datasets``, the logs on ``/logs``), and the checkpoints written in between land in the MinIO bucket and in WEKA
(per client host too: each job node's writes at scope host, named like the node)."""
from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lockstep import localcluster as lc
from lockstep.exporters.catalog import storagesys as m
from lockstep.stack import http_get
from tests.helpers.sim_scenarios import SHIPPED

pytestmark = [pytest.mark.integration, pytest.mark.long(30)]

# checkpoints every 100 s of scenario (2 TB in 30 s): at 20x one every 5 s of wall time, the exporter's interval
SPEED = 20.0
TARGETS = ("minio-ckpt", "vast-sim", "weka-sim")


def scrape(url: str) -> dict[tuple, float]:
    text = http_get(f"{url}/metrics")[1].decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def total(samples: dict[tuple, float], metric, target: str) -> float | None:
    found = [v for (name, labels), v in samples.items() if name == metric.name and ("target", target) in labels]
    return sum(found) if found else None


def view(samples: dict[tuple, float], metric, path: str) -> float | None:
    return samples.get((metric.name, (("name", path), ("scope", "view"), ("target", "vast-sim"))))


def host_writes(samples: dict[tuple, float]) -> float:
    """WEKA's write bytes summed over its hosts (0 before any host wrote)."""
    return sum(v for (name, labels), v in samples.items()
               if name == m.WRITE_BYTES.name and ("scope", "host") in labels and ("target", "weka-sim") in labels)


def fs_writes(samples: dict[tuple, float], name: str) -> float:
    """WEKA's write bytes to file system ``name`` (0 before its first counted minute)."""
    return samples.get((m.WRITE_BYTES.name, (("name", name), ("scope", "filesystem"), ("target", "weka-sim"))), 0.0)


def until(check, timeout: float, what: str, services):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (result := check()):
            return result
        for s in services:
            assert s.alive(), f"{s.name} exited while waiting for {what}:\n{s.log_tail()}"
        time.sleep(0.5)
    pytest.fail(f"{what} not seen within {timeout:.0f}s")


def test_the_storage_exporter_reads_the_simulated_systems_on_the_config_the_simulator_writes(tmp_path, stack):
    root = tmp_path / "sim"
    sim = lc.start_sim(SHIPPED / "checkpoint.yaml", root, stack, speed=SPEED, extra_args=["--duration", "0"])
    exporter = lc.start_storage_exporter(root / "storage-exporter.yaml", stack)
    services = (sim, exporter)

    def all_up():
        samples = scrape(exporter.url)
        up = [samples.get((m.UP.name, (("target", t),))) for t in TARGETS]
        # WEKA's counters appear with its first whole minute (3 s of wall time here)
        return samples if up == [1.0] * 3 and total(samples, m.WRITE_BYTES, "weka-sim") is not None else None
    first = until(all_up, 60, "all three targets up", services)

    def grown():
        samples = scrape(exporter.url)
        more = {(metric.name, t): total(samples, metric, t) > total(first, metric, t)
                for metric, t in ((m.READ_BYTES, "vast-sim"), (m.WRITE_BYTES, "vast-sim"),
                                  (m.WRITE_BYTES, "minio-ckpt"), (m.WRITE_BYTES, "weka-sim"))}
        more["views"] = view(samples, m.READ_BYTES, "/datasets") > view(first, m.READ_BYTES, "/datasets") and \
            view(samples, m.WRITE_BYTES, "/logs") > view(first, m.WRITE_BYTES, "/logs")
        more["weka hosts"] = host_writes(samples) > host_writes(first)
        more["weka file systems"] = fs_writes(samples, "checkpoints") > fs_writes(first, "checkpoints")
        return samples if all(more.values()) else None
    assert view(first, m.READ_BYTES, "/datasets") is not None     # the written config reads VAST's views
    second = until(grown, 60, "VAST's reads and writes (its cluster and its views), MinIO's and WEKA's checkpoint "
                   "writes (its cluster, its hosts and its file system) grown", services)
    assert all(second[(m.UP.name, (("target", t),))] == 1.0 for t in TARGETS)
    # the written config reads WEKA per host (per_host: true): node00 is a client that wrote its share
    assert second[(m.WRITE_BYTES.name, (("name", "node00"), ("scope", "host"), ("target", "weka-sim")))] > 0
    assert second[(m.HOST_INFO.name, (("name", "node00"), ("role", "client"), ("target", "weka-sim")))] == 1.0
    # and per file system (per_filesystem: true): the checkpoints are its checkpoints file system's writes
    assert fs_writes(second, "checkpoints") > 0 and fs_writes(second, "default") == 0
    assert not [k for k in second if k[0] == m.POLL_FAILURES.name and ("target", "weka-sim") in k[1]]
    # what the bucket received it holds (MinIO's usage, and WEKA's checkpoints file system, grow with the checkpoints)
    wrote = total(second, m.WRITE_BYTES, "minio-ckpt") - total(first, m.WRITE_BYTES, "minio-ckpt")
    assert total(second, m.USED, "minio-ckpt") - total(first, m.USED, "minio-ckpt") == wrote
    fs = (m.USED.name, (("name", "checkpoints"), ("scope", "filesystem"), ("target", "weka-sim")))
    assert second[fs] > first[fs]
