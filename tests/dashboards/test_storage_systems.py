"""The storage dashboard's storage-system panels on live data: the storage exporter (its app, in a thread of its own)
polls a fake MinIO, a fake VAST VMS and a fake WEKA cluster every second while their counters keep moving (WEKA: a
newer minute each time), and a real Prometheus scrapes it every second; every panel on the systems returns data, and
the panels' per-target series name every system (latency and capacity: those that report them)."""
from __future__ import annotations

import asyncio
import copy
import re
import threading
import time
from datetime import datetime, timedelta

import pytest
from aiohttp import web

from lockstep.dashboards import check
from lockstep.dashboards.build import build_all
from lockstep.exporters.catalog.selectors import STORAGE_JOB
from lockstep.exporters.storagesys.app import create_app
from lockstep.exporters.storagesys.config import StorageConfig, Target
from lockstep.exporters.toolkit.credentials import Credentials
from lockstep.stack import start_prometheus
from tests.helpers.storagefake import MINIO_BUCKET, VAST, Behaviour, FakeStorage
from tests.helpers.wekafake import NODE_STATS, NODES, STATS, Cluster, FakeWeka

pytestmark = pytest.mark.integration

VALUES = {"datasource": "prometheus", "system": ".*", "node": ".*", "__rate_interval": "4s", "__interval": "1s",
          "__range": "20s", "__range_s": "20"}
SYSTEMS = ("s3", "vms", "w1")


def scaled(text: str, prefixes: tuple[str, ...], factor: float) -> str:
    """``text`` with the value of every line of ``prefixes`` times ``factor`` (a counter that moved)."""
    def line(m: re.Match) -> str:
        return f"{m.group(1)} {float(m.group(2)) * factor:.17g}"
    return "\n".join(re.sub(r"^(.*\S)\s+(\S+)$", line, ln) if ln.startswith(prefixes) else ln
                     for ln in text.splitlines()) + "\n"


def later(stats: dict, minutes: int) -> dict:
    """A recorded ``stats_show`` answer (the cluster's, under ``all``, or per node) with every minute ``minutes``
    later (a newer minute each time)."""
    out = copy.deepcopy(stats)
    for node in out.values():
        for item in node["ops"]:
            at = datetime.fromisoformat(item["timestamp"]) + timedelta(minutes=minutes)
            item["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


class Systems:
    """The fakes and the storage exporter served from one event loop in a thread of its own."""

    def __init__(self) -> None:
        self.storage, self.weka = FakeStorage(), FakeWeka()
        self.storage.add("s3", Behaviour(body=MINIO_BUCKET))
        self.storage.add("vms", Behaviour(body=VAST, kind="vast", basic=("lockstep-ro", "s3cr3t-vms")))
        self.cluster = self.weka.add("w1", Cluster())
        self.loop = asyncio.new_event_loop()
        self.exporter_port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        return runner.addresses[0][1]

    async def _start(self) -> None:
        self._runners: list[web.AppRunner] = []
        fakes = await self._serve(self.storage.app())
        weka = await self._serve(self.weka.app())
        base = f"http://127.0.0.1:{fakes}"
        config = StorageConfig((
            Target("s3", "minio", f"{base}/s3"),
            Target("vms", "vast", f"{base}/vms", basic_auth=Credentials("lockstep-ro", "s3cr3t-vms")),
            Target("w1", "weka", f"http://127.0.0.1:{weka}/w1", basic_auth=Credentials("lockstep-ro", "w3ka-s3cret"),
                   per_host=True)),
            interval_s=1.0, timeout_s=1.0)
        self.exporter_port = await self._serve(create_app(config))
        self._moving = asyncio.create_task(self._move())

    async def _move(self) -> None:
        """Every half second, every system has counted more: bytes and operations (WEKA: one more minute)."""
        for k in range(1, 10_000):
            self.storage.targets["s3"].body = scaled(MINIO_BUCKET, ("minio_bucket_requests", "minio_bucket_traffic"),
                                                     1 + k)
            self.storage.targets["vms"].body = scaled(VAST, ("vast_cnode_metrics_ProtoMetrics_",), 1 + k / 1000)
            self.cluster.stats = later(STATS, k)
            self.cluster.node_stats = later(NODE_STATS, k)
            await asyncio.sleep(0.5)

    def __enter__(self) -> "Systems":
        self._thread.start()
        assert self._ready.wait(30), "the fakes and the exporter did not start"
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            self._moving.cancel()
            self.storage.hung.set()
            self.weka.hung.set()
            for runner in reversed(self._runners):
                await runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)



def wait_for(url: str, expr: str, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check.run(url, check.PanelQuery("-", "-", "-", expr, True), 0, time.time(), 1)
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"never true: {expr}")


def test_storage_system_panels_show_every_system(tmp_path, stack):
    with Systems() as systems:
        target = f"127.0.0.1:{systems.exporter_port}"
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": STORAGE_JOB, "static_configs": [{"targets": [target]}]}]}, tmp_path / "prom"))
        start = time.time()
        for name in SYSTEMS:
            wait_for(prom.url, f'rate(lockstep_storage_system_operations_total{{target="{name}"}}[4s]) > 0')
        # a few more scrapes, so that the panels' range queries hold several steps with full rate windows
        wait_for(prom.url, 'count_over_time(lockstep_storage_system_up{target="w1"}[8s]) >= 6')
        end = time.time()
        storage = {name: d for name, d in build_all().items() if name == "lockstep-storage.json"}
        queries = [q for q in check.panel_queries(storage, VALUES) if q.panel.startswith("Storage system")]
        assert len(queries) == 6
        present = check.present_metrics(prom.url, end)
        empty, absent = check.data_check(prom.url, queries, start, end, 1, present)
        assert empty == [] and absent == set()
        for q in queries:
            answer = check.run(prom.url, q, start, end, 1)
            shown = {r["metric"].get("target") for r in answer}
            # MinIO's bucket metrics carry no latency sum, and the recorded bucket no quota
            expected = {"vms", "w1"} if q.panel in ("Storage system capacity used",
                                                    "Storage system mean latency per operation") else set(SYSTEMS)
            assert shown == expected, (q.panel, shown)
            assert not [r for r in answer if r["metric"].get("scope") == "host"], q.panel   # clients shown apart
        # w1's client hosts apart: the hosts of the per-node fixture's FRONTEND nodes (which all read)
        clients = [q for q in check.panel_queries(storage, VALUES) if q.panel.startswith("Busiest client hosts")]
        assert len(clients) == 2
        frontends = {n["hostname"] for n in NODES.values() if "FRONTEND" in n["roles"]}
        reads = check.run(prom.url, clients[0], start, end, 1)
        assert {(r["metric"]["target"], r["metric"]["name"]) for r in reads} == {("w1", h) for h in frontends}
