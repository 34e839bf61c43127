"""The pod watcher against the simulated API server (real HTTP, the real list/watch JSON shapes): sync,
events, paging, 410 relist, bookmarks, and recovery from a server that is down, slow or forbids it."""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Callable

import pytest
from aiohttp import web

from lockstep.exporters.kube import podwatch
from lockstep.exporters.kube.apiserver import ApiServer
from lockstep.exporters.kube.podwatch import PodWatcher
from lockstep.simulator.kubeapi import Faults, PodStore, create_app
from lockstep.simulator.kubepods import SimContainer, SimPod

TOKEN = "agent-token"


def sim_pod(name: str, node: str = "node00", **labels: str) -> SimPod:
    return SimPod("ml-team", name, node, (SimContainer("c", ("0",)),), labels)


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Server:
    """The simulated API server on a fixed port of this test's event loop, stoppable and restartable."""

    def __init__(self, store: PodStore, faults: Faults) -> None:
        self.store, self.faults, self.requests, self.accepts = store, faults, [], set()
        self.watch_versions: list[int] = []      # the resourceVersion each watch asked to resume from
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = create_app(self.store, [TOKEN], self.faults)

        @web.middleware
        async def record(request, handler):
            self.requests.append("watch" if request.query.get("watch") else "list")
            if request.query.get("watch"):
                self.watch_versions.append(int(request.query.get("resourceVersion") or 0))
            self.accepts.add(request.headers.get("Accept"))
            return await handler(request)
        app.middlewares.append(record)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        await self.runner.cleanup()

    def watcher(self, **kw) -> PodWatcher:
        server = ApiServer(f"http://127.0.0.1:{self.port}", token=TOKEN)
        options = {"request_timeout_s": 2.0, "watch_timeout_s": 30, "backoff_s": (0.05, 0.2), **kw}
        return PodWatcher(server, "node00", **options)


@pytest.fixture
async def server():
    s = Server(PodStore(), Faults(bookmark_s=0.2))
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
def watch(server):
    started = []

    def start(**kw) -> PodWatcher:
        w = server.watcher(**kw)
        w.start()
        started.append(w)
        return w
    yield start
    for w in started:
        w.close()


def names(w: PodWatcher) -> set[str]:
    return {name for _, name in w.snapshot().pods}


async def test_lists_this_nodes_pods_and_follows_their_events(server, watch):
    server.store.put(sim_pod("a-0"))
    server.store.put(sim_pod("other-0", node="node01"))
    w = watch()
    await until(lambda: w.snapshot().synced, "first list")
    assert names(w) == {"a-0"} and w.snapshot().error is None
    server.store.put(sim_pod("b-0"))
    server.store.put(sim_pod("a-0", team="x"))                       # MODIFIED
    await until(lambda: names(w) == {"a-0", "b-0"}, "ADDED event")
    await until(lambda: w.snapshot().pods[("ml-team", "a-0")].labels == {"team": "x"}, "MODIFIED event")
    server.store.delete("ml-team", "a-0")
    await until(lambda: names(w) == {"b-0"}, "DELETED event")
    server.store.put(sim_pod("c-0", node="node01"))
    await asyncio.sleep(0.5)
    assert names(w) == {"b-0"} and server.requests.count("list") == 1
    # metadata only, as client-go's metadata informers ask; whole pods from a server that can't
    assert server.accepts == {podwatch.ACCEPT_LIST, podwatch.ACCEPT_WATCH}


async def test_the_simulated_server_answers_metadata_only_in_the_api_servers_shape(server, aiohttp_client):
    server.store.put(sim_pod("a-0", team="x"))
    client = await aiohttp_client(create_app(server.store, [TOKEN]))
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": podwatch.ACCEPT_LIST}
    body = await (await client.get("/api/v1/pods", headers=headers)).json()
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    (item,) = body["items"]
    assert set(item) == {"kind", "apiVersion", "metadata"} and item["metadata"]["labels"] == {"team": "x"}
    full = await (await client.get("/api/v1/pods", headers={**headers, "Accept": "application/json"})).json()
    assert full["kind"] == "PodList" and set(full["items"][0]) == {"metadata", "spec", "status"}


async def test_a_long_list_is_read_in_pages(server, watch, monkeypatch):
    monkeypatch.setattr(podwatch, "PAGE", 2)
    for i in range(5):
        server.store.put(sim_pod(f"p-{i}"))
    w = watch()
    await until(lambda: w.snapshot().synced, "first list")
    assert names(w) == {f"p-{i}" for i in range(5)} and server.requests.count("list") == 3


async def test_bookmarks_keep_a_quiet_watch_current_and_an_expired_version_relists(server, watch, caplog):
    server.store.put(sim_pod("a-0"))
    w = watch(watch_timeout_s=1)           # the server ends each watch after a second; it resumes
    await until(lambda: w.snapshot().synced, "first list")
    server.store.put(sim_pod("x-0", node="node01"))    # the version moves on, with no event for node00
    moved_to = server.store.snapshot(None)[0]
    # bookmarks (every 0.2 s) carry the new version to the watcher: its next watch resumes from it
    await until(lambda: any(v >= moved_to for v in server.watch_versions), "a watch resumed from the bookmark's version")
    server.store.compact()
    await until(lambda: server.requests.count("watch") >= 3, "watches resumed")
    assert server.requests.count("list") == 1          # resumed from the bookmark's version: nothing expired
    # Without bookmarks the watcher's version stays behind; compaction then expires it: an ERROR event
    # with 410 on the open watch, and a new list that brings what changed meanwhile.
    server.faults.bookmark_s = 1e9
    server.store.put(sim_pod("y-0", node="node01"))
    server.store.compact()
    server.store.put(sim_pod("b-0"))
    await until(lambda: names(w) == {"a-0", "b-0"}, "relisted after 410")
    assert server.requests.count("list") == 2 and w.snapshot().error is None
    assert not [r for r in caplog.records if r.name == "lockstep.kube" and r.levelno >= logging.WARNING]


async def test_an_api_server_that_goes_away_is_reported_and_found_again(server, watch):
    server.store.put(sim_pod("a-0"))
    w = watch()
    await until(lambda: w.snapshot().synced, "first list")
    await server.stop()
    await until(lambda: w.snapshot().error is not None, "the failure noticed")
    assert names(w) == {"a-0"}             # what it knew stays: the kubelet decides what still runs
    server.store.put(sim_pod("b-0"))
    await server.start()
    await until(lambda: w.snapshot().error is None and names(w) == {"a-0", "b-0"}, "recovery")


async def test_rbac_forbidden_names_the_missing_permission_and_recovers_once_granted(server, watch):
    server.faults.forbidden = True
    w = watch()
    await until(lambda: w.snapshot().error is not None, "the refusal")
    snap = w.snapshot()
    assert not snap.synced and snap.error.startswith("403 Forbidden") and 'cannot list resource "pods"' in snap.error
    server.faults.forbidden = False
    await until(lambda: w.snapshot().synced and w.snapshot().error is None, "recovery")


async def test_a_slow_api_server_times_out_and_is_retried(server, watch):
    server.faults.delay_s = 2.0             # beyond the watcher's request timeout
    w = watch(request_timeout_s=1.0)
    await until(lambda: w.snapshot().error is not None, "the timeout")
    assert w.snapshot().error == "API server did not answer in time" and not w.snapshot().synced
    server.faults.delay_s = 0.0
    await until(lambda: w.snapshot().synced and w.snapshot().error is None, "recovery")


async def test_a_wrong_token_is_refused(server):
    bad = PodWatcher(ApiServer(f"http://127.0.0.1:{server.port}", token="stolen"), "node00", backoff_s=(0.05, 0.2))
    bad.start()
    try:
        await until(lambda: bad.snapshot().error is not None, "the refusal")
        assert bad.snapshot().error == "401 Unauthorized: Unauthorized"
    finally:
        bad.close()
