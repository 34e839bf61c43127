"""WEKA's JSON-RPC 2.0 management API (``POST <url>/api/v1``, port 14000) as WEKA's own exporter and its client
library call it (sources: tests/fixtures/weka/README.md): ``{"jsonrpc": "2.0", "method", "params", "id"}`` in, the
answer's ``result`` out. ``RpcSession`` logs in with ``userlogin`` (username, password, optional org), sends
``Authorization: <token_type> <access_token>``, and on HTTP 401 renews the tokens once with ``user_refresh_token``
(logging in again where that fails) and retries the call once. The tokens live in that object only, one per target:
never logged, never in an error's text, never written anywhere; logins and renewals are one at a time, so that
calls made side by side (a target's part beside its own read) share the tokens. ``WekaReader`` is one target's poll,
mapped by ``weka`` (pure): the cluster's ``ops`` minutes integrated into counters, and each file system's capacity;
with ``per_host: true`` also a part (the poller's: read beside the rest, failing alone) that reads the ``ops``
minutes per node and integrates them per host, and with ``per_filesystem: true`` one that reads the ``fs_stats``
minutes and integrates them per file system.

Failures, as the poller counts them: no connection ``connect``; an error status, a JSON-RPC ``error`` object (the
system refused the call) or a login that returns no tokens ``http``; an answer that is not JSON-RPC ``parse``."""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import ssl
import time
from typing import Awaitable, Callable

import aiohttp

from lockstep.exporters.storagesys import weka
from lockstep.exporters.storagesys.config import Target
from lockstep.exporters.storagesys.errors import AnswerError, HttpStatusError, PollError
from lockstep.exporters.storagesys.fetch import read_body
from lockstep.exporters.toolkit.jsonload import load_json
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.storage")
API_PATH = "/api/v1"
_AUTH = ("userlogin", "user_refresh_token")   # their error messages are not quoted: they may echo what was sent
_OK = (200, 201, 202)                          # the statuses WEKA's client library reads an answer from
MAP_TTL_S = 600.0   # nodes_list and hosts_list are asked again after this long (sooner for an unknown node id)


class Unauthorized(HttpStatusError):
    """HTTP 401: the access token expired or was revoked."""


@dataclasses.dataclass(frozen=True)
class Tokens:
    access: str = dataclasses.field(repr=False)
    token_type: str = "Bearer"
    refresh: str | None = dataclasses.field(default=None, repr=False)

    def header(self) -> str:
        return f"{self.token_type} {self.access}"


def tokens(result: object) -> Tokens:
    """The tokens of a ``userlogin`` or ``user_refresh_token`` result. An empty result is a refused login (WEKA's
    client library reads it as a wrong username or password); a one-item list is taken as its item (the REST
    documentation's example of the same tokens has that form); ``token_type`` defaults to ``Bearer``."""
    if isinstance(result, list) and len(result) == 1:
        result = result[0]
    if not isinstance(result, dict):
        raise AnswerError("login: the result is not an object")
    if not result:
        raise HttpStatusError("login refused: no tokens returned (wrong username, password or org?)")
    access, token_type, refresh = (result.get(k) for k in ("access_token", "token_type", "refresh_token"))
    if not isinstance(access, str) or not access:
        raise AnswerError("login: no access_token in the result")
    if token_type is not None and (not isinstance(token_type, str) or not token_type.strip()):
        raise AnswerError("login: token_type is not a word")
    return Tokens(access, token_type or "Bearer", refresh if isinstance(refresh, str) and refresh else None)


def answer(method: str, body: bytes) -> object:
    """The ``result`` of one JSON-RPC answer to ``method``."""
    try:
        doc = load_json(body)
    except ValueError:
        raise AnswerError(f"{method}: the answer is not JSON") from None
    if not isinstance(doc, dict) or doc.get("jsonrpc") not in ("2.0", None):
        raise AnswerError(f"{method}: the answer is not a JSON-RPC 2.0 object")
    error = doc.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) and method not in _AUTH else None
        raise HttpStatusError(f"JSON-RPC error {code!r} from {method}" + (f": {str(message)[:200]}" if message else ""))
    if "result" not in doc:
        raise AnswerError(f"{method}: neither result nor error in the answer")
    return doc["result"]


class RpcSession:
    """One target's JSON-RPC calls; ``call`` is awaited by one poll at a time."""

    def __init__(self, session: aiohttp.ClientSession, target: Target, tls: ssl.SSLContext | bool, max_bytes: int) -> None:
        self.session, self.target, self.tls, self.max_bytes = session, target, tls, max_bytes
        self._tokens: Tokens | None = None
        self._ids = itertools.count(1)
        self._renewing = asyncio.Lock()   # one login or renewal at a time

    def __repr__(self) -> str:   # never the tokens
        return f"RpcSession(target={self.target.name!r}, logged_in={self._tokens is not None})"

    async def _post(self, method: str, params: dict, authorization: str | None) -> object:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   # WEKA's client library sends its offset from UTC; zero asks for times in UTC
                   "UTC-Offset-Seconds": "0"}
        if authorization is not None:
            headers["Authorization"] = authorization
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": next(self._ids)})
        try:
            async with self.session.post(self.target.url + API_PATH, data=body.encode(), headers=headers,
                                         ssl=self.tls, allow_redirects=False) as resp:
                if resp.status == 401:
                    raise Unauthorized(f"HTTP 401 from {method}")
                if resp.status not in _OK:
                    raise HttpStatusError(f"HTTP {resp.status} from {method}")
                data = await read_body(resp, self.max_bytes)
        except aiohttp.ClientError as exc:
            raise PollError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        return answer(method, data)

    async def _login(self) -> Tokens:
        creds = self.target.basic_auth
        if creds is None:
            raise HttpStatusError("no username and password_file to log in with")
        params = {"username": creds.username, "password": creds.password}
        if self.target.org is not None:
            params["org"] = self.target.org
        self._tokens = None
        self._tokens = tokens(await self._post("userlogin", params, None))
        return self._tokens

    async def _renew(self, old: Tokens) -> Tokens:
        """New tokens after a 401: refreshed where a refresh token is held (sent, as WEKA's library sends it, with
        the expired authorization), else, or where the refresh fails, a new login."""
        self._tokens = None
        if old.refresh is not None:
            try:
                new = tokens(await self._post("user_refresh_token", {"refresh_token": old.refresh}, old.header()))
            except PollError as exc:
                log.debug("weka token refresh failed, logging in again", extra=kv(target=self.target.name, err=str(exc)))
            else:
                self._tokens = new if new.refresh is not None else dataclasses.replace(new, refresh=old.refresh)
                return self._tokens
        return await self._login()

    async def call(self, method: str, params: dict) -> object:
        """The result of ``method``; logged in first where no tokens are held; one renewal and retry on a 401. A
        call waiting while another logs in or renews uses the tokens that one got."""
        async with self._renewing:
            held = self._tokens or await self._login()
        try:
            return await self._post(method, params, held.header())
        except Unauthorized:
            async with self._renewing:
                # renewed by another call meanwhile: its tokens; else renew these
                held = self._tokens if self._tokens is not None and self._tokens is not held else await self._renew(held)
        return await self._post(method, params, held.header())   # a second 401 fails the poll


class WekaReader:
    """One WEKA target's poll: ``stats_show`` and ``filesystems_get_capacity``, within the poller's timeout. The
    minutes are counted only once both answers are in: a failed poll counts nothing, and the next one counts what
    it missed. With ``per_host: true``, the part ``per_host`` (``parts``; the poller reads it beside ``read``, within
    a timeout of its own, and a failure of it loses the host series alone): ``stats_show`` per node, and
    ``nodes_list`` and ``hosts_list`` when the ones held are older than ``MAP_TTL_S`` or the answer holds a node id
    they lack (asked once for that id: one still unknown after is skipped until the next regular refresh). With
    ``per_filesystem: true``, the part ``per_filesystem`` likewise (``read_filesystems``)."""

    def __init__(self, target: Target, session: aiohttp.ClientSession, tls: ssl.SSLContext | bool, max_bytes: int) -> None:
        self.target = target
        self.rpc = RpcSession(session, target, tls, max_bytes)
        self.counts = weka.Counts()
        self.host_counts = weka.HostCounts() if target.per_host else None
        self.nodes: weka.NodeMap | None = None
        self.roles: dict[str, str] = {}
        self.clock: Callable[[], float] = time.monotonic
        self._nodes_at = 0.0
        self._unknown: frozenset[str] = frozenset()   # node ids still unknown after the last refresh
        self.fs_counts = weka.HostCounts() if target.per_filesystem else None
        self.fs_names: dict[str, str] = {}   # file system id -> name, from the newest filesystems_get_capacity
        self._fs_unknown: frozenset[str] = frozenset()   # ids fs_stats holds that no capacity answer listed

    async def read(self) -> list[Sample]:
        buckets = weka.parse_stats(await self.rpc.call("stats_show", weka.stats_params()))
        answer = await self.rpc.call("filesystems_get_capacity", {})
        capacity = weka.parse_capacity(self.target.name, answer)
        if self.fs_counts is not None:   # the per-file-system part names its file systems from this answer
            self.fs_names = weka.filesystem_names(answer)
        self.counts.add(buckets)
        return [*self.counts.samples(self.target.name), *capacity]

    def parts(self) -> dict[str, Callable[[], Awaitable[list[Sample]]]]:
        """The parts this target opted in to, by their config key."""
        parts = {"per_host": self.read_hosts} if self.host_counts is not None else {}
        if self.fs_counts is not None:
            parts["per_filesystem"] = self.read_filesystems
        return parts

    async def _refresh_nodes(self) -> None:
        nodes = weka.parse_nodes(await self.rpc.call("nodes_list", {}))
        roles = weka.parse_hosts(await self.rpc.call("hosts_list", {}))
        self.nodes, self.roles, self._nodes_at = nodes, roles, self.clock()

    async def read_hosts(self) -> list[Sample]:
        """The part ``per_host``: the minutes are counted only once every answer it needs is in."""
        assert self.host_counts is not None
        nodes = weka.parse_node_stats(await self.rpc.call("stats_show", weka.node_stats_params()),
                                      self.host_counts.floor())
        if self.nodes is None or self.clock() - self._nodes_at >= MAP_TTL_S \
                or set(nodes) - self.nodes.known - self._unknown:
            await self._refresh_nodes()
            assert self.nodes is not None
            self._unknown = frozenset(set(nodes) - self.nodes.known)
            if self._unknown:
                log.debug("weka node ids not in nodes_list, skipped", extra=kv(
                    target=self.target.name, nodes=",".join(sorted(self._unknown))[:200]))
        self.host_counts.add(nodes, self.nodes.frontend)
        self.host_counts.keep(set(self.nodes.frontend.values()))   # a host nodes_list no longer names: gone
        return list(self.host_counts.samples(self.target.name, self.roles))

    async def read_filesystems(self) -> list[Sample]:
        """The part ``per_filesystem``: ``stats_show`` of category ``fs_stats``, one stat after another as WEKA's
        exporter asks, counted once every answer is in. The file systems are named by the newest capacity answer of
        ``read``; one this part meets first (a new file system, or the first poll, read side by side) has
        ``filesystems_get_capacity`` asked here, once for that id (one still unlisted after is skipped, as WEKA's
        exporter skips the ids the API returns for file systems that do not exist)."""
        assert self.fs_counts is not None
        answers = {stat: await self.rpc.call("stats_show", weka.fs_stats_params(stat)) for stat in weka.STATS}
        filesystems = weka.parse_fs_stats(answers, self.fs_counts.floor())
        if set(filesystems) - set(self.fs_names) - self._fs_unknown:
            self.fs_names = weka.filesystem_names(await self.rpc.call("filesystems_get_capacity", {}))
            self._fs_unknown = frozenset(set(filesystems) - set(self.fs_names))
            if self._fs_unknown:
                log.debug("weka file system ids not in filesystems_get_capacity, skipped", extra=kv(
                    target=self.target.name, ids=",".join(sorted(self._fs_unknown))[:200]))
        self.fs_counts.add(filesystems, self.fs_names)
        self.fs_counts.keep(set(self.fs_names.values()))   # a file system deleted: its series end
        return list(self.fs_counts.samples(self.target.name, {}, weka.FILESYSTEM_SCOPE))
