"""A fake WEKA management API (JSON-RPC 2.0 over HTTP, aiohttp, in process), a sibling of ``storagefake``: each
cluster a path prefix ``/<name>`` answering ``POST /<name>/api/v1`` with the constructed answers of
tests/fixtures/weka (README.md there says what is constructed). It checks the envelope and the login as WEKA's client
library uses them (tests/fixtures/weka/README.md, "Facts used"): ``userlogin`` with the cluster's username,
password and org issues tokens (a wrong one: an empty ``result``, which that library reads as a refused login);
every other call needs ``Authorization: <token_type> <access_token>`` and is answered 401 without it or once the
test has expired the token (``expire``); ``user_refresh_token`` with the refresh token issues a new access token.
``stats_show`` with ``per_node`` (the per-host part) answers the per-node fixture, ``nodes_list`` and ``hosts_list``
theirs; ``stats_show`` of category ``fs_stats`` (the per-file-system part) the stat's answer in the fs_stats fixture.
Each is recorded in ``calls`` (the per-node one as ``stats_show/per_node``, a per-file-system one as
``stats_show/fs_stats``). A cluster can also hang or answer garbage, and its per-node or per-file-system
``stats_show`` alone can (``per_node_mode``, ``fs_mode``)."""
from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field

from aiohttp import web

from tests.helpers.paths import FIXTURES

WEKA = FIXTURES / "weka"
STATS = json.loads((WEKA / "stats-show-ops.json").read_text())
STATS_LATER = json.loads((WEKA / "stats-show-ops-later.json").read_text())
CAPACITY = json.loads((WEKA / "filesystems-get-capacity.json").read_text())
NODE_STATS = json.loads((WEKA / "stats-show-ops-per-node.json").read_text())
NODE_STATS_LATER = json.loads((WEKA / "stats-show-ops-per-node-later.json").read_text())
NODES = json.loads((WEKA / "nodes-list.json").read_text())
HOSTS = json.loads((WEKA / "hosts-list.json").read_text())
FS_STATS = json.loads((WEKA / "stats-show-fs-stats.json").read_text())   # stat -> the result of its call
STAT_NAMES = ["ops.READS", "ops.WRITES", "ops.READ_BYTES", "ops.WRITE_BYTES", "ops.READ_LATENCY", "ops.WRITE_LATENCY"]
PER_NODE = {"stat": STAT_NAMES, "interval": "5m", "per_node": True, "no_zeroes": True, "show_internal": True}


@dataclass
class Cluster:
    username: str = "lockstep-ro"
    password: str = "w3ka-s3cret"
    org: str | None = None               # the org a login must name (None: none named)
    stats: object = field(default_factory=lambda: STATS)
    capacity: object = field(default_factory=lambda: CAPACITY)
    node_stats: object = field(default_factory=lambda: NODE_STATS)
    nodes: object = field(default_factory=lambda: NODES)
    hosts: object = field(default_factory=lambda: HOSTS)
    mode: str = "answer"                 # answer | hang | garbage
    per_node_mode: str = "answer"        # answer | hang | garbage, of stats_show with per_node alone
    fs_stats: dict = field(default_factory=lambda: FS_STATS)   # stat -> result of stats_show of category fs_stats
    fs_mode: str = "answer"              # answer | hang | garbage, of stats_show of category fs_stats alone
    refresh_fails: bool = False          # user_refresh_token answered with a JSON-RPC error
    errors: dict[str, dict] = field(default_factory=dict)   # method (or stats_show/per_node) -> a JSON-RPC error
    calls: list[tuple[str, int | None]] = field(default_factory=list)   # (method, HTTP status) in order
    access: set[str] = field(default_factory=set)            # access tokens now valid
    refresh: set[str] = field(default_factory=set)
    issued: list[str] = field(default_factory=list)          # every token issued, for the tests' leak checks

    def expire(self) -> None:
        """The access tokens expire (the refresh tokens stay valid)."""
        self.access.clear()


class FakeWeka:
    def __init__(self) -> None:
        self.clusters: dict[str, Cluster] = {}
        self.hung = asyncio.Event()   # set at teardown to let hung handlers go
        self._serial = itertools.count(1)

    def add(self, name: str, cluster: Cluster | None = None) -> Cluster:
        self.clusters[name] = cluster or Cluster()
        return self.clusters[name]

    def _tokens(self, c: Cluster, refresh: str | None = None) -> dict:
        n = next(self._serial)
        access, refresh = f"acc-{n}-tok", refresh or f"ref-{n}-tok"
        c.access.add(access)
        c.refresh.add(refresh)
        c.issued += [access, refresh]
        return {"access_token": access, "token_type": "Bearer", "expires_in": 300, "refresh_token": refresh}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        c = self.clusters.get(request.match_info["name"])
        if c is None:
            raise web.HTTPNotFound()
        if c.mode == "hang":
            await self.hung.wait()
        if c.mode == "garbage":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>\n", content_type="text/html")
        doc = await request.json()
        assert doc.get("jsonrpc") == "2.0" and isinstance(doc.get("params"), dict) and "id" in doc, doc
        method, params = doc["method"], doc["params"]

        def reply(result: object = None, error: dict | None = None) -> web.Response:
            c.calls.append((method, 200))
            body = {"jsonrpc": "2.0", "id": doc["id"], **({"error": error} if error else {"result": result})}
            return web.json_response(body)

        if method in c.errors:
            return reply(error=c.errors[method])
        if method == "userlogin":
            ok = (params.get("username"), params.get("password"), params.get("org")) == (c.username, c.password, c.org)
            return reply(self._tokens(c) if ok else {})
        if method == "user_refresh_token":
            if c.refresh_fails or params.get("refresh_token") not in c.refresh:
                return reply(error={"code": -32000, "message": "refresh token rejected"})
            return reply(self._tokens(c, params["refresh_token"]))
        kind, _, token = request.headers.get("Authorization", "").partition(" ")
        if kind != "Bearer" or token not in c.access:
            c.calls.append((method, 401))
            raise web.HTTPUnauthorized()
        if method == "stats_show" and params.get("per_node"):
            assert params == PER_NODE, params
            method = "stats_show/per_node"
            return await self._misbehaving(c, c.per_node_mode, method) or reply(c.node_stats, c.errors.get(method))
        if method == "stats_show" and params.get("category") == "fs_stats":
            assert params == {"category": "fs_stats", "stat": params.get("stat"), "interval": "5m",
                              "param": {"fS": "*"}} and params["stat"] in FS_STATS, params
            method = "stats_show/fs_stats"
            return await self._misbehaving(c, c.fs_mode, method) or reply(c.fs_stats.get(params["stat"]),
                                                                          c.errors.get(method))
        if method == "stats_show":
            assert params == {"stat": STAT_NAMES, "interval": "5m"}, params
            return reply(c.stats)
        if method == "filesystems_get_capacity":
            return reply(c.capacity)
        if method in ("nodes_list", "hosts_list"):
            assert params == {}, params
            return reply(c.nodes if method == "nodes_list" else c.hosts)
        return reply(error={"code": -32601, "message": f"no method {method}"})

    async def _misbehaving(self, c: Cluster, mode: str, method: str) -> web.Response | None:
        """What a part's call in ``mode`` answers: no answer until teardown (hang), HTML (garbage), or None (answer)."""
        if mode == "hang":
            await self.hung.wait()
        if mode == "garbage":
            c.calls.append((method, 200))
            return web.Response(text="<html><body>502 Bad Gateway</body></html>\n", content_type="text/html")
        return None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{name}/api/v1", self._handle)
        return app
