"""A small simulated Kubernetes API server: ``GET /api/v1/pods`` list and watch, the way kube-apiserver answers.

What a node agent's reflector meets: the ``spec.nodeName`` field selector, paged lists (``limit`` and
``continue``), watches from a ``resourceVersion`` as newline-delimited JSON events (ADDED, MODIFIED,
DELETED, BOOKMARK with ``allowWatchBookmarks``, the stream ended after ``timeoutSeconds``), a
version older than the kept history answered with an ERROR event of status 410 Expired, bearer-token
authentication (401) and RBAC (403) answered with ``Status`` objects. ``Faults`` slows or forbids it.
"""
from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from aiohttp import web

from lockstep.simulator.kubepods import SimPod, pod_json

POLL_S = 0.05
SERVICE_ACCOUNT = "system:serviceaccount:lockstep:lockstep-node"


class Expired(Exception):
    pass


@dataclass
class Faults:
    delay_s: float = 0.0           # every answer waits this long first (a slow or overloaded server)
    forbidden: bool = False        # RBAC denies the agent's service account
    bookmark_s: float = 1.0        # how often an idle watch gets a BOOKMARK


@dataclass
class PodStore:
    """The pods and the history of their changes, numbered by resourceVersion."""
    history: int = 1000
    _pods: dict[tuple[str, str], tuple[SimPod, int]] = field(default_factory=dict)
    _events: deque = field(default_factory=deque)
    _version: int = 1000
    _oldest: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def put(self, pod: SimPod) -> None:
        with self._lock:
            kind = "MODIFIED" if pod.key in self._pods else "ADDED"
            self._record(kind, pod)

    def delete(self, namespace: str, name: str) -> None:
        with self._lock:
            if (namespace, name) in self._pods:
                self._record("DELETED", self._pods[(namespace, name)][0])

    def replace(self, pods: Iterable[SimPod]) -> None:
        """Make the store hold exactly ``pods``: what changed is added, modified or deleted."""
        wanted = {p.key: p for p in pods}
        with self._lock:
            for key in [k for k in self._pods if k not in wanted]:
                self._record("DELETED", self._pods[key][0])
            for key, pod in wanted.items():
                if key not in self._pods or self._pods[key][0] != pod:
                    self._record("MODIFIED" if key in self._pods else "ADDED", pod)

    def expired(self, version: int) -> bool:
        return version < self._oldest

    def compact(self) -> None:
        """Forget the history (etcd compaction): a watch resuming from an older version gets 410."""
        with self._lock:
            self._events.clear()
            self._oldest = self._version

    def _record(self, kind: str, pod: SimPod) -> None:
        self._version += 1
        if kind == "DELETED":
            del self._pods[pod.key]
        else:
            self._pods[pod.key] = (pod, self._version)
        self._events.append((self._version, kind, pod))
        while len(self._events) > self.history:
            self._oldest = self._events.popleft()[0]

    def snapshot(self, node: str | None) -> tuple[int, list[tuple[SimPod, int]]]:
        with self._lock:
            return self._version, [v for v in self._pods.values() if node is None or v[0].node == node]

    def since(self, version: int, node: str | None) -> tuple[int, list[tuple[int, str, SimPod]]]:
        with self._lock:
            if version < self._oldest:
                raise Expired(f"too old resource version: {version} ({self._oldest})")
            return self._version, [e for e in self._events if e[0] > version and (node is None or e[2].node == node)]


STORE = web.AppKey("store", PodStore)
FAULTS = web.AppKey("faults", Faults)
TOKENS = web.AppKey("tokens", frozenset)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _error(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status(code, reason, message), status=code)


def _node(request: web.Request) -> str | None:
    selector = request.query.get("fieldSelector", "")
    if not selector:
        return None
    key, _, value = selector.replace("==", "=").partition("=")
    if key != "spec.nodeName" or not value:
        raise web.HTTPBadRequest(text=json.dumps(status(400, "BadRequest", f"unsupported field selector {selector!r}")),
                                 content_type="application/json")
    return value


async def pods(request: web.Request) -> web.StreamResponse:
    faults = request.app[FAULTS]
    if faults.delay_s:
        await asyncio.sleep(faults.delay_s)
    if request.headers.get("Authorization", "").removeprefix("Bearer ") not in request.app[TOKENS]:
        return _error(401, "Unauthorized", "Unauthorized")
    watch = request.query.get("watch") in ("1", "true")
    if faults.forbidden:
        verb = "watch" if watch else "list"
        return _error(403, "Forbidden", f'pods is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource "pods" '
                                        'in API group "" at the cluster scope')
    return await (_watch(request) if watch else _list(request))


async def _list(request: web.Request) -> web.Response:
    store, node = request.app[STORE], _node(request)
    limit = int(request.query.get("limit", "0") or 0)
    version, items = store.snapshot(node)
    start = 0
    if request.query.get("continue"):
        token = json.loads(base64.b64decode(request.query["continue"]))
        if store.expired(token["rv"]):
            return _error(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                          "list result. You can start a new list without the continue parameter.")
        start = token["start"]
    items.sort(key=lambda item: item[0].key)
    page = items[start:start + limit] if limit else items[start:]
    metadata: dict[str, Any] = {"resourceVersion": str(version)}
    if limit and start + limit < len(items):
        metadata["continue"] = base64.b64encode(json.dumps({"rv": version, "start": start + limit}).encode()).decode()
    partial = _partial(request, "PartialObjectMetadataList")
    kind = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1"} if partial else \
        {"kind": "PodList", "apiVersion": "v1"}
    body = {**kind, "metadata": metadata,
            "items": [pod_json(pod, str(rv), metadata_only=partial) for pod, rv in page]}
    return web.json_response(body)


def _partial(request: web.Request, kind: str) -> bool:
    """The client asked for metadata only (``Accept: application/json;as=<kind>;g=meta.k8s.io;v=v1``)."""
    return any(f"as={kind};" in f"{part.replace(' ', '')};" and "g=meta.k8s.io" in part
               for part in request.headers.get("Accept", "").split(","))


async def _watch(request: web.Request) -> web.StreamResponse:
    try:
        return await _stream(request)
    except ConnectionError:       # the client went away (a watcher closing, an agent stopped)
        return web.StreamResponse()


async def _stream(request: web.Request) -> web.StreamResponse:
    store, node, faults = request.app[STORE], _node(request), request.app[FAULTS]
    partial = _partial(request, "PartialObjectMetadata")
    version, initial = int(request.query.get("resourceVersion") or 0), []
    if version == 0:   # "0" or none: start with the current state, as ADDED events
        version, initial = store.snapshot(node)
    bookmarks = request.query.get("allowWatchBookmarks") == "true"
    deadline = asyncio.get_running_loop().time() + float(request.query.get("timeoutSeconds", "1800"))
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    for pod, rv in initial:
        await _send(response, {"type": "ADDED", "object": pod_json(pod, str(rv), typed=True, metadata_only=partial)})
    last_sent = asyncio.get_running_loop().time()
    while asyncio.get_running_loop().time() < deadline and not faults.forbidden:
        try:
            current, events = store.since(version, node)
        except Expired as exc:
            await _send(response, {"type": "ERROR", "object": status(410, "Expired", str(exc))})
            break
        for rv, kind, pod in events:
            await _send(response, {"type": kind, "object": pod_json(pod, str(rv), typed=True, metadata_only=partial)})
            version, last_sent = rv, asyncio.get_running_loop().time()
        if bookmarks and asyncio.get_running_loop().time() - last_sent >= faults.bookmark_s:
            version, last_sent = current, asyncio.get_running_loop().time()
            kind = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"} if partial else \
                {"kind": "Pod", "apiVersion": "v1"}
            await _send(response, {"type": "BOOKMARK", "object": {**kind, "metadata": {"resourceVersion": str(current)}}})
        await asyncio.sleep(POLL_S)
    await response.write_eof()
    return response


async def _send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")


def create_app(store: PodStore, tokens: Iterable[str], faults: Faults | None = None) -> web.Application:
    app = web.Application()
    app[STORE], app[TOKENS], app[FAULTS] = store, frozenset(tokens), faults or Faults()
    app.router.add_get("/api/v1/pods", pods)
    return app
