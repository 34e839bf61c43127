"""Regression tests for bugs found reviewing the node agent (exporters/): each names what went wrong."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pynvml

from exporters.gpu import xid


class FlakyEvents:
    """pynvml's event-set calls; the first wait fails with a non-NVML error, as the simulator backend
    does on an ``xid_events`` entry without ``seq``; then one XID 79 arrives."""

    def __init__(self) -> None:
        self.waits = 0

    def nvmlEventSetCreate(self):
        return SimpleNamespace()

    def nvmlDeviceRegisterEvents(self, handle, event_types, event_set) -> None:
        pass

    def nvmlEventSetFree(self, event_set) -> None:
        pass

    def nvmlEventSetWait(self, event_set, timeout_ms):
        self.waits += 1
        if self.waits == 1:
            raise KeyError("seq")
        if self.waits == 2:
            return SimpleNamespace(device=HANDLE, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
        time.sleep(0.01)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)


HANDLE = SimpleNamespace(index=0)


def test_xid_watcher_survives_a_non_nvml_error(monkeypatch):
    """Before: any exception but NVMLError ended the watcher thread silently, and XIDs were never counted again."""
    monkeypatch.setattr(xid, "RETRY_S", 0.01)
    watcher = xid.XidWatcher(FlakyEvents(), [HANDLE])
    try:
        deadline = time.monotonic() + 5
        while not watcher.counts() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.counts() == {(0, 79): 1}
        assert watcher.alive()
    finally:
        watcher.close()
    assert not watcher.alive()


async def test_bcrypt_check_runs_off_the_event_loop(aiohttp_client, monkeypatch):
    """Before: bcrypt.checkpw ran in the event loop, so every wrong password (never cached) stalled every
    scrape for ~0.25 s. Now it runs in a worker thread; the answers are unchanged."""
    import threading
    from base64 import b64encode

    import bcrypt
    from aiohttp import web

    from exporters import web as lweb
    from exporters.webconfig import WebConfig

    checked_in: list[threading.Thread] = []
    real_checkpw = bcrypt.checkpw

    def checkpw(password: bytes, hashed: bytes) -> bool:
        checked_in.append(threading.current_thread())
        return real_checkpw(password, hashed)

    monkeypatch.setattr(lweb.bcrypt, "checkpw", checkpw)
    config = WebConfig("web.yml", basic_auth_users={"prom": bcrypt.hashpw(b"secret", bcrypt.gensalt(4))})
    app = web.Application(middlewares=[lweb.auth_middleware(config)])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/metrics", ok)
    client = await aiohttp_client(app)

    def auth(password: str) -> dict:
        return {"Authorization": "Basic " + b64encode(f"prom:{password}".encode()).decode()}

    assert (await client.get("/metrics", headers=auth("wrong"))).status == 401
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200  # cached: no third check
    assert len(checked_in) == 2
    assert threading.main_thread() not in checked_in


def test_nfs_mount_point_with_a_space_matches_the_mount_table():
    """Before: mountstats' octal escapes (``\\040`` for a space, as in /proc/self/mounts) reached the
    ``mount`` label, so an NFS mount point with a space differed from the same path everywhere else."""
    from exporters.storage.mounts import parse_mounts
    from exporters.storage.mountstats import parse_mountstats

    text = ("device 10.0.0.20:/export/my\\040home mounted on /mnt/my\\040home with fstype nfs4 statvers=1.1\n"
            "\tbytes:\t1 2 3 4 5 6 7 8\n")
    (mount,) = parse_mountstats(text)
    assert (mount.device, mount.mountpoint, mount.normal_read_bytes) == ("10.0.0.20:/export/my home", "/mnt/my home", 1)
    table = parse_mounts("10.0.0.20:/export/my\\040home /mnt/my\\040home nfs4 rw 0 0\n")
    assert table[0].mountpoint == mount.mountpoint


def test_descriptors_of_a_vanished_port_are_closed_at_rediscovery(tmp_path, monkeypatch):
    """A port that disappears while its device stays (a port unbound, a split undone) must not keep its
    held descriptors until close(): they leak one set per such event."""
    import os
    import shutil
    from pathlib import Path

    from exporters.collectors.infiniband import InfinibandCollector, Options

    monkeypatch.setattr("exporters.fabric.device_scan.REDISCOVER_S", 0.0)
    root = tmp_path / "sys"
    shutil.copytree(Path(__file__).parent / "fixtures/sysfs/real", root, symlinks=True)
    for d, _, _ in os.walk(root):
        os.chmod(d, 0o755)
    collector = InfinibandCollector(Options(root))
    collector.collect()
    port2 = str(root / "class/infiniband/mlx4_0/ports/2") + "/"
    assert any(p.startswith(port2) for p in collector.scan.files._held)
    shutil.move(root / "class/infiniband/mlx4_0/ports/2", tmp_path / "away")
    assert not [s for s in collector.collect() if s.labels[:2] == ("mlx4_0", "2")]
    assert not any(p.startswith(port2) for p in collector.scan.files._held)
    collector.close()


async def test_gzip_refused_with_q_zero_is_not_sent(aiohttp_client):
    """Before: any Accept-Encoding containing "gzip" got gzip, even ``gzip;q=0`` (RFC 9110 §12.5.3:
    "not acceptable"), so such a client received a body it had said it cannot decode."""
    import gzip

    from exporters.config import ExporterConfig
    from exporters.scrape import Scraper
    from exporters.server import create_app

    from exporters.catalog import fabric
    from exporters.sample import Sample

    info = Sample(fabric.IB_DEVICE_INFO, ("mlx5_0", "MT_0000000008", "16.35.1012", "MT4123"), 1.0)
    client = await aiohttp_client(create_app(ExporterConfig(), Scraper({}, [info])))
    cases = {"gzip": True, "deflate, gzip;q=0.5": True, "*": True, "GZIP": True,
             "gzip;q=0": False, "gzip; q=0.000, identity": False, "identity": False, "": False,
             "*;q=0": False, "br": False, "x-gzip": True, "*, gzip;q=0": False}
    for header, compressed in cases.items():
        response = await client.get("/metrics", headers={"Accept-Encoding": header}, auto_decompress=False)
        body = await response.read()
        assert (response.headers.get("Content-Encoding") == "gzip") is compressed, header
        text = gzip.decompress(body) if compressed else body
        assert b'lockstep_ib_device_info{device="mlx5_0"' in text, header


def test_pfc_log_once_keys_do_not_grow_with_changing_error_text(tmp_path, caplog):
    """Before: the log-once key held the exception text, which names the bad line's content, so a file
    that keeps being malformed differently (a counter value changing every scrape) added a key, and
    logged a warning, on every scrape: unbounded memory, no rate limit."""
    import logging
    import re
    import uuid

    from exporters import logs
    from exporters.collectors.pfc import Options, PfcCollector
    from exporters.fabric.ethtool import DirEthtool

    name = f"ens{uuid.uuid4().hex[:6]}"  # log-once keys live for the process: a name no other test used
    (tmp_path / name).mkdir()
    statistics = tmp_path / name / "statistics"
    collector = PfcCollector(DirEthtool(tmp_path), Options(tmp_path, re.compile(".*"), tmp_path))
    before = len(logs._once)
    with caplog.at_level(logging.WARNING, logger="lockstep.collector.pfc"):
        for scrape in range(20):
            statistics.write_text(f"NIC statistics:\n     rx_prio3_pause: {scrape}x\n")
            assert collector.collect() == []
    assert len(logs._once) - before <= 1
    assert len([r for r in caplog.records if name in r.getMessage()]) == 1
    collector.close()


def test_nfs_mount_stacked_on_itself_gives_one_series_of_the_visible_mount(tmp_path):
    """Before: the same export mounted twice on one path (a second ``mount`` over the first; the lower
    one is hidden but stays in mountstats) gave two series with identical labels. Prometheus keeps
    the first of duplicate series in a scrape, i.e. the hidden mount's flat counters, and drops the
    visible mount's I/O. The last entry is the mount on top, the one paths resolve to."""
    from exporters.collectors.nfs import NfsCollector

    header = "device 10.0.0.20:/export/data mounted on /data with fstype nfs4 statvers=1.1\n"
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountstats").write_text(
        header + "\tbytes:\t10 0 0 0 0 0 0 0\n" + header + "\tbytes:\t999 0 0 0 0 0 0 0\n")
    samples = list(NfsCollector(tmp_path).collect())
    keys = [(s.metric.name, s.labels) for s in samples]
    assert len(keys) == len(set(keys)), keys
    read = [s.value for s in samples if s.metric.name == "lockstep_storage_read_bytes_total"]
    assert read == [999.0]


def test_pfc_state_of_vanished_interfaces_is_dropped(tmp_path):
    """Before: the pfc collector (plans, label tuples) and its statistics source (drivers, paths) kept
    an entry per interface name ever seen, so interface churn (SR-IOV VFs created and renamed, veths
    matched by --pfc.interfaces) grew memory without bound; each plan holds the driver's whole
    statistics name list (~1,000 names for mlx5)."""
    import re
    import shutil
    from pathlib import Path

    from exporters.collectors.pfc import Options, PfcCollector
    from exporters.fabric.ethtool import DirEthtool

    source = Path(__file__).parent / "fixtures/ethtool/node/ens1np0"
    ethtool = DirEthtool(tmp_path)
    collector = PfcCollector(ethtool, Options(tmp_path, re.compile("vf.*"), tmp_path))
    for n in range(12):
        shutil.copytree(source, tmp_path / f"vf{n}")
        assert {s.labels[0] for s in collector.collect()} == {f"vf{n}"}
        shutil.rmtree(tmp_path / f"vf{n}")
    assert collector.collect() == []
    assert (len(collector._plans), len(collector._labels)) == (0, 0)
    assert (len(ethtool._drivers), len(ethtool._paths)) == (0, 0)
    collector.close()
