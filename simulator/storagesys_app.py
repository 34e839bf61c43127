"""The simulated storage systems (``storagesys``) served on the simulator's own aiohttp app, beside Redfish, and the
storage exporter's config for them (``DIR/storage-exporter.yaml``, its password files beside it, mode 0600).

Routes (one address for all three, as the exporter's config wants a system's address without a path):
- ``GET /minio/v2/metrics/bucket``: MinIO's bucket metrics, unauthenticated (MinIO's ``MINIO_PROMETHEUS_AUTH_TYPE``
  ``public``);
- ``GET /api/prometheusmetrics/`` and ``GET /api/prometheusmetrics/views``: VMS's exporter, the cluster's and per
  view, basic auth, decoded from the header as a server does; 401 with a challenge when missing or wrong;
- ``POST /api/v1``: WEKA's JSON-RPC 2.0 (tests/fixtures/weka/README.md, "Facts used"): ``userlogin`` with the
  username and password issues tokens (a wrong one: an empty ``result``); ``user_refresh_token`` a new access token
  for a refresh token it issued; ``stats_show`` (the cluster's, with ``per_node`` each node's, or of category
  ``fs_stats`` each file system's), ``nodes_list``, ``hosts_list`` and ``filesystems_get_capacity`` need
  ``Authorization: Bearer <access_token>`` (401 without it, or once the token is older than its five minutes).
The passwords are drawn anew on every run."""
from __future__ import annotations

import hmac
import itertools
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from lockstep.exporters.toolkit.basicauth import parse_basic
from lockstep.exporters.toolkit.jsonload import load_json
from lockstep.simulator import storagesys as sim
from lockstep.simulator.storagesys import Systems

CONFIG = "storage-exporter.yaml"
USERNAME = "lockstep-ro"
# target name -> (kind, its password file in DIR, or None: no credentials)
TARGETS = {"minio-ckpt": ("minio", None), sim.VAST_CLUSTER: ("vast", "storage-vast.password"),
           # a WEKA target's name is its cluster's name in the series (the answer names none)
           "weka-sim": ("weka", "storage-weka.password")}
ACCESS_TTL_S = 300.0           # WEKA's access token lives five minutes (the login result's expires_in)
KEEP_REFRESH = 32              # refresh tokens kept: the newest logins'
_INTERVAL = re.compile(r"^([1-9][0-9]?)m$")


@dataclass
class Access:
    """The run's credentials and WEKA's tokens now valid (access token -> when it expires, monotonic)."""

    vast_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    weka_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    access: dict[str, float] = field(default_factory=dict, repr=False)
    refresh: dict[str, None] = field(default_factory=dict, repr=False)
    serial: itertools.count = field(default_factory=lambda: itertools.count(1))

    def tokens(self, refresh: str | None = None) -> dict:
        now = time.monotonic()
        self.access = {t: until for t, until in self.access.items() if until > now}
        access = f"sim-{next(self.serial)}-{secrets.token_urlsafe(18)}"
        self.access[access] = now + ACCESS_TTL_S
        if refresh is None:
            refresh = secrets.token_urlsafe(24)
            self.refresh[refresh] = None
            while len(self.refresh) > KEEP_REFRESH:
                del self.refresh[next(iter(self.refresh))]
        return {"access_token": access, "token_type": "Bearer", "expires_in": int(ACCESS_TTL_S), "refresh_token": refresh}

    def valid(self, header: str) -> bool:
        kind, _, token = header.partition(" ")
        return kind == "Bearer" and self.access.get(token, 0.0) > time.monotonic()


SYSTEMS = web.AppKey("storage_systems", Systems)   # advanced in place by the tick loop
ACCESS = web.AppKey("storage_access", Access)


def exporter_config(url: str, period_s: float) -> dict:
    """The storage exporter's config for the three systems at ``url`` (the simulator's address)."""
    interval = min(15.0, period_s)
    targets = []
    for name, (kind, password_file) in TARGETS.items():
        target = {"name": name, "kind": kind, "url": url}
        if password_file:
            target.update(username=USERNAME, password_file=password_file)   # relative: beside the config
        if kind == "vast":
            target["views"] = True   # its views too: /api/prometheusmetrics/views
        if kind == "weka":
            target["per_host"] = True   # per client host too: stats_show per node, nodes_list, hosts_list
            target["per_filesystem"] = True   # and per file system: stats_show of category fs_stats
        targets.append(target)
    return {"interval_s": interval, "timeout_s": round(min(5.0, 0.8 * interval), 1), "targets": targets}


def write_credentials(root: Path, access: Access) -> None:
    """Each password alone in its file in ``root``, readable by its owner only."""
    passwords = {"vast": access.vast_password, "weka": access.weka_password}
    for kind, password_file in TARGETS.values():
        if password_file:
            path = root / password_file
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(passwords[kind] + "\n")
            os.chmod(path, 0o600)   # a file left by an earlier run keeps its mode through O_CREAT


def _same(given: str | bytes, expected: str) -> bool:
    return hmac.compare_digest(given.encode() if isinstance(given, str) else given, expected.encode())


async def minio(request: web.Request) -> web.Response:
    return web.Response(body=sim.minio_answer(request.app[SYSTEMS]).encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def _vast_authorized(request: web.Request) -> None:
    creds = parse_basic(request.headers.get("Authorization", ""))
    if creds is None or not (_same(creds[0], USERNAME) & _same(creds[1], request.app[ACCESS].vast_password)):
        raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Basic realm="api"'})


async def vast(request: web.Request) -> web.Response:
    _vast_authorized(request)
    return web.Response(body=sim.vast_answer(request.app[SYSTEMS]).encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def vast_views(request: web.Request) -> web.Response:
    _vast_authorized(request)
    return web.Response(body=sim.vast_views_answer(request.app[SYSTEMS]).encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def _rpc(doc_id: object, result: object = None, error: dict | None = None) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": doc_id, **({"error": error} if error else {"result": result})})


def _stats_params(params: dict) -> tuple[list[str], int] | None:
    """(the asked ``ops`` stats, minutes) of ``stats_show``'s parameters; None when malformed."""
    stat, interval = params.get("stat"), _INTERVAL.match(str(params.get("interval", "")))
    if not isinstance(stat, list) or not all(isinstance(s, str) for s in stat) or interval is None:
        return None
    return [s.removeprefix("ops.") for s in stat if s.startswith("ops.")], int(interval.group(1))


def _fs_stats_params(params: dict) -> tuple[str, int, str] | None:
    """(the stat, minutes, the file system id or ``*``) of ``stats_show`` of category ``fs_stats``; None when
    malformed."""
    interval, param = _INTERVAL.match(str(params.get("interval", ""))), params.get("param")
    fs_id = param.get("fS") if isinstance(param, dict) else None
    if params.get("stat") not in sim.WEKA_STATS or interval is None or not isinstance(fs_id, (str, int)) \
            or isinstance(fs_id, bool):
        return None
    return params["stat"], int(interval.group(1)), str(fs_id)


def _node_ids(params: dict) -> set[str] | None:
    """``node_ids`` as ``NodeId<k>`` keys (given as numbers or as such keys); None when absent; ValueError when
    malformed."""
    ids = params.get("node_ids")
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(n, (int, str)) and not isinstance(n, bool) for n in ids):
        raise ValueError("node_ids")
    return {n if isinstance(n, str) and n.startswith("NodeId<") else f"NodeId<{n}>" for n in ids}


async def weka(request: web.Request) -> web.Response:
    access = request.app[ACCESS]
    try:
        doc = load_json(await request.read())
    except ValueError:
        return _rpc(None, error={"code": -32700, "message": "Parse error"})
    params = doc.get("params", {}) if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0" or not isinstance(doc.get("method"), str) \
            or not isinstance(params, dict):
        return _rpc(doc.get("id") if isinstance(doc, dict) else None, error={"code": -32600, "message": "Invalid Request"})
    method, doc_id = doc["method"], doc.get("id")
    if method == "userlogin":
        ok = (_same(str(params.get("username", "")), USERNAME) & _same(str(params.get("password", "")),
                                                                       access.weka_password)) and "org" not in params
        return _rpc(doc_id, access.tokens() if ok else {})
    if method == "user_refresh_token":
        refresh = params.get("refresh_token")
        if not isinstance(refresh, str) or refresh not in access.refresh:
            return _rpc(doc_id, error={"code": -32000, "message": "invalid refresh token"})
        return _rpc(doc_id, access.tokens(refresh))
    if not access.valid(request.headers.get("Authorization", "")):
        raise web.HTTPUnauthorized()
    if method == "stats_show" and params.get("category") == "fs_stats":
        fs_asked = _fs_stats_params(params)
        if fs_asked is None:
            return _rpc(doc_id, error={"code": -32602, "message": "Invalid params"})
        return _rpc(doc_id, sim.weka_fs_stats_answer(request.app[SYSTEMS], *fs_asked))
    if method == "stats_show":
        asked = _stats_params(params)
        if asked is None:
            return _rpc(doc_id, error={"code": -32602, "message": "Invalid params"})
        if params.get("per_node") is True:
            try:
                ids = _node_ids(params)
            except ValueError:
                return _rpc(doc_id, error={"code": -32602, "message": "Invalid params"})
            return _rpc(doc_id, sim.weka_node_stats_answer(request.app[SYSTEMS], *asked,
                                                           no_zeroes=params.get("no_zeroes") is True, node_ids=ids))
        return _rpc(doc_id, sim.weka_stats_answer(request.app[SYSTEMS], *asked))
    if method == "filesystems_get_capacity":
        return _rpc(doc_id, sim.weka_capacity_answer(request.app[SYSTEMS]))
    if method == "nodes_list":
        return _rpc(doc_id, sim.weka_nodes_answer(request.app[SYSTEMS]))
    if method == "hosts_list":
        return _rpc(doc_id, sim.weka_hosts_answer(request.app[SYSTEMS]))
    return _rpc(doc_id, error={"code": -32601, "message": "Method not found"})


def add_routes(app: web.Application, systems: Systems, access: Access) -> None:
    """The three systems' routes on ``app`` (the Redfish app: its paths start with a device name and
    ``/redfish/v1``, so none of these collide with it)."""
    app[SYSTEMS], app[ACCESS] = systems, access
    app.router.add_get(sim.MINIO_PATH, minio)
    app.router.add_get(sim.VAST_PATH, vast)
    app.router.add_get(sim.VAST_VIEWS_PATH, vast_views)
    app.router.add_post(sim.WEKA_PATH, weka)
