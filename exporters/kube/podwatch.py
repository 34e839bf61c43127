"""This node's pods, kept current by a list and a watch on the API server (client-go's reflector, small).

``GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`` (paged, metadata only), then a watch from the list's
``resourceVersion`` with bookmarks; each ADDED/MODIFIED/DELETED event updates the cache and each event or
BOOKMARK moves the resourceVersion on, so a watch the server ends (``timeoutSeconds``) resumes where it
stopped. ``410 Gone`` (the version fell out of the server's history, as a status or an ERROR event)
means list again. Any other failure (refused, timed out, 403 Forbidden) is kept as the current error
and retried with exponential backoff and jitter; it is logged when it starts, changes or ends. Scrapes
read the cache only: no request per scrape. It runs in a thread of its own with its own event loop, so
that the collector works the same embedded in a prometheus_client registry.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping

import aiohttp

from lockstep.exporters.kube.apiserver import ApiServer
from lockstep.exporters.kube.identity import PodMeta, pod_meta
from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.kube")
PAGE = 500
# Metadata only (labels, annotations, owners), as client-go's metadata informers ask: a pod's spec and
# status (env values included) never cross the wire; a server that can't answer so sends whole pods.
ACCEPT_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ACCEPT_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MAX_EVENT = 16 << 20


class Expired(Exception):
    """410 Gone: the requested resourceVersion is older than the server's history."""


class ApiError(Exception):
    pass


@dataclass(frozen=True)
class Snapshot:
    pods: Mapping[tuple[str, str], PodMeta] = field(default_factory=dict)   # (namespace, name) → pod
    synced: bool = False       # a list has succeeded at least once
    error: str | None = None   # why the last attempt failed, None while list+watch work


class PodWatcher:
    def __init__(self, server: ApiServer, node: str, *, request_timeout_s: float = 10.0,
                 watch_timeout_s: int = 240, backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        self.server, self.node = server, node
        self.request_timeout_s, self.watch_timeout_s, self.backoff_s = request_timeout_s, watch_timeout_s, backoff_s
        self._snapshot = Snapshot()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def start(self) -> None:
        started = threading.Event()

        def run() -> None:
            async def main() -> None:
                self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
                started.set()
                await self.run()
            try:
                asyncio.run(main())
            except asyncio.CancelledError:
                pass

        self._thread = threading.Thread(target=run, name="lockstep-pod-watch", daemon=True)
        self._thread.start()
        started.wait(5)

    def close(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(5)

    async def run(self) -> None:
        """List, then watch until the server ends each watch, for ever; relist on 410, back off on errors."""
        delay = self.backoff_s[0]
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    version = await self._list(session)
                    delay = self.backoff_s[0]
                    while True:
                        started = time.monotonic()
                        version = await self._watch(session, version)
                        if time.monotonic() - started < 1.0:   # a server ending watches at once: don't spin
                            await asyncio.sleep(self.backoff_s[0])
                except Expired:
                    log.debug("pod watch: resourceVersion expired, listing again", extra=kv(node=self.node))
                except (aiohttp.ClientError, asyncio.TimeoutError, ApiError, OSError, ValueError) as exc:
                    self._failed(_describe(exc))
                    await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, self.backoff_s[1])

    def _params(self, **extra: Any) -> dict[str, str]:
        return {"fieldSelector": f"spec.nodeName={self.node}", **{k: str(v) for k, v in extra.items()}}

    async def _request(self, session: aiohttp.ClientSession, params: Mapping[str, str],
                       timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        accept = ACCEPT_WATCH if "watch" in params else ACCEPT_LIST
        response = await session.get(f"{self.server.url}/api/v1/pods", params=params, timeout=timeout,
                                     headers={**self.server.headers(), "Accept": accept},
                                     ssl=self.server.ssl_context() or True)
        if response.status != 200:
            status = await _status(response)
            response.release()
            if response.status == 410:
                raise Expired(status)
            raise ApiError(f"{response.status} {response.reason}: {status}")
        return response

    async def _list(self, session: aiohttp.ClientSession) -> str:
        pods: dict[tuple[str, str], PodMeta] = {}
        token = ""
        timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
        while True:
            params = self._params(limit=PAGE, **({"continue": token} if token else {}))
            async with await self._request(session, params, timeout) as response:
                body = await response.json(content_type=None)
            for item in body.get("items") or ():
                pod = pod_meta(item)
                pods[(pod.namespace, pod.name)] = pod
            token = (body.get("metadata") or {}).get("continue") or ""
            if not token:
                self._ok(pods)
                return (body.get("metadata") or {}).get("resourceVersion", "")

    async def _watch(self, session: aiohttp.ClientSession, version: str) -> str:
        params = self._params(watch=1, resourceVersion=version, allowWatchBookmarks="true",
                              timeoutSeconds=self.watch_timeout_s)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.request_timeout_s,
                                        sock_read=self.watch_timeout_s + self.request_timeout_s)
        async with await self._request(session, params, timeout) as response:
            self._ok()
            async for line in _lines(response.content):
                version = self._apply(json.loads(line)) or version
        return version

    def _apply(self, event: Mapping[str, Any]) -> str:
        """One watch event into the cache; the resourceVersion it moves to ("" for none)."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Expired(obj.get("message", ""))
            raise ApiError(f"watch error {obj.get('code')}: {obj.get('message', '')}")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            pod = pod_meta(obj)
            with self._lock:
                pods = dict(self._snapshot.pods)
                if kind == "DELETED":
                    pods.pop((pod.namespace, pod.name), None)
                else:
                    pods[(pod.namespace, pod.name)] = pod
                self._snapshot = Snapshot(pods, self._snapshot.synced, self._snapshot.error)
        return (obj.get("metadata") or {}).get("resourceVersion", "")

    def _ok(self, pods: Mapping[tuple[str, str], PodMeta] | None = None) -> None:
        with self._lock:
            was = self._snapshot.error
            self._snapshot = Snapshot(self._snapshot.pods if pods is None else pods, True, None)
        if was is not None:
            log.info("pod watch recovered", extra=kv(node=self.node, server=self.server.url))

    def _failed(self, error: str) -> None:
        with self._lock:
            was = self._snapshot.error
            self._snapshot = Snapshot(self._snapshot.pods, self._snapshot.synced, error)
        if error != was:
            log.warning("pod watch failing", extra=kv(node=self.node, server=self.server.url, err=error))


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The watch stream's events, one JSON document per line. Not ``StreamReader.readline``: it refuses
    lines over 128 KiB, and a pod with large annotations is larger (etcd allows objects of 1.5 MiB)."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
        if len(buffer) > MAX_EVENT:
            raise ApiError(f"watch event over {MAX_EVENT} bytes")
    if buffer.strip():
        yield buffer


async def _status(response: aiohttp.ClientResponse) -> str:
    """The message of a ``Status`` object the API server answers errors with, else the body's start."""
    text = await response.text()
    try:
        return json.loads(text).get("message", text[:200])
    except (ValueError, AttributeError):
        return text[:200]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "API server did not answer in time"
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ApiError) else str(exc)
