"""Redfish over HTTP: GET one resource by its ``@odata.id`` on a shared aiohttp ClientSession.

Every URL is ``target.url + @odata.id`` (the target URL may carry a path prefix, as the simulator's
per-device services do). Only service-relative ids (``/redfish/v1/...``) are followed: an absolute
link to another host (a PSU's ``Links.Outlet`` on its PDU) would send this target's credentials
elsewhere."""
from __future__ import annotations

import asyncio
import base64
import json
import ssl
from typing import Any, Awaitable, Iterable, Protocol

import aiohttp

from exporters.power.config import Target

SERVICE_ROOT = "/redfish/v1/"
# Requests in flight to one device at a time: embedded BMC/PDU web servers serve few connections
# and answer 503 when pushed (the collections of a PDU hold dozens of outlets).
PER_TARGET_REQUESTS = 4


class Fetch(Protocol):
    """GET one resource. ``static=True`` marks a structural resource (service root, collections,
    chassis and PDU documents followed only for their links): it may come from the per-target
    structure cache instead of the wire."""

    def __call__(self, odata_id: str, static: bool = False) -> Awaitable[dict[str, Any]]: ...


class RedfishError(Exception):
    """A failed GET; the message names the resource, never a credential."""


class Redfish(Protocol):
    def fetcher(self, target: Target, timeout_s: float, structure: dict[str, dict[str, Any]]) -> Fetch: ...


def _retryable(exc: Exception) -> bool:
    # Connection refused/reset and 5xx (BMCs answer 503 while busy) may pass; a timeout means the
    # BMC is hung, and asking again would push the poll past the scrape timeout.
    if isinstance(exc, aiohttp.ClientResponseError):
        return exc.status >= 500 or exc.status == 429
    return isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(exc, asyncio.TimeoutError)


class HttpRedfish:
    """The real client: one session for all targets, per-target auth and TLS settings."""

    def __init__(self, session: aiohttp.ClientSession, retries: int = 2, backoff_s: float = 0.1) -> None:
        self.session, self.retries, self.backoff_s = session, retries, backoff_s
        self._ssl: dict[str, ssl.SSLContext | bool] = {}

    def _ssl_for(self, target: Target) -> ssl.SSLContext | bool:
        if not target.tls_verify:
            return False  # explicit per-target opt-out (self-signed BMC certificates)
        if target.ca_file is None:
            return True
        if target.ca_file not in self._ssl:
            self._ssl[target.ca_file] = ssl.create_default_context(cafile=target.ca_file)
        return self._ssl[target.ca_file]

    def fetcher(self, target: Target, timeout_s: float, structure: dict[str, dict[str, Any]]) -> Fetch:
        headers = {"Accept": "application/json"}
        if target.credentials:
            headers["Authorization"] = basic_auth(target.credentials.username, target.credentials.password)
        tls = self._ssl_for(target)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        gate = asyncio.Semaphore(PER_TARGET_REQUESTS)

        async def get_once(url: str) -> dict[str, Any]:
            async with gate, self.session.get(url, ssl=tls, timeout=timeout, raise_for_status=True,
                                              headers=headers) as response:
                body = await response.read()
            try:
                doc = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise RedfishError(f"malformed JSON: {exc}") from None
            if not isinstance(doc, dict):
                raise RedfishError(f"expected a JSON object, got {type(doc).__name__}")
            return doc

        async def fetch(odata_id: str, static: bool = False) -> dict[str, Any]:
            if not odata_id.startswith("/redfish/v1"):
                raise RedfishError(f"refusing to follow non-service link {odata_id!r}")
            if static and odata_id in structure:
                return structure[odata_id]
            url = target.url + odata_id
            for attempt in range(self.retries + 1):
                try:
                    doc = await get_once(url)
                    if static:
                        structure[odata_id] = doc
                    return doc
                except RedfishError as exc:
                    raise RedfishError(f"GET {odata_id}: {exc}") from None
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    if attempt == self.retries or not _retryable(exc):
                        raise RedfishError(f"GET {odata_id}: {_describe(exc)}") from None
                    await asyncio.sleep(self.backoff_s * 2 ** attempt)
            raise AssertionError("unreachable")

        return fetch


def basic_auth(username: str, password: str) -> str:
    """RFC 7617 Basic credentials (UTF-8), the scheme Redfish services accept without a session."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def _describe(exc: Exception) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"HTTP {exc.status}"
    return f"{type(exc).__name__}: {exc}"


def link(doc: dict[str, Any], key: str) -> str | None:
    """``doc[key]["@odata.id"]`` when the resource links it."""
    value = doc.get(key)
    return value.get("@odata.id") if isinstance(value, dict) else None


def members(doc: dict[str, Any]) -> list[str]:
    """The ``@odata.id`` of each member of a collection, in the service's order."""
    return [m["@odata.id"] for m in doc.get("Members", []) if isinstance(m, dict) and "@odata.id" in m]


def member_id(odata_id: str) -> str:
    """A member's Id: the last segment of its ``@odata.id`` (DSP0266 requires the URI to end with it)."""
    return odata_id.rstrip("/").rsplit("/", 1)[-1]


def lowest_id(ids: Iterable[str]) -> str | None:
    """The lowest of some sibling Ids ("2" before "10"). Where a label value must stay readable for
    the usual single member, this member keeps the plain value and its siblings are qualified with
    their Id: members added later (a PDU chained behind, a second CDU) get higher Ids, so adding one
    renames no existing series, where "qualify only when there are several" renamed them all."""
    return min(ids, key=lambda i: (len(i), i), default=None)


def reading(doc: dict[str, Any] | None, key: str, field: str = "Reading") -> float | None:
    """``doc[key][field]`` as a float (Redfish excerpts: ``{"Reading": 374, "DataSourceUri": ...}``);
    None where the property, the reading or the resource is absent or null."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return number(value.get(field) if isinstance(value, dict) else None)


def number(value: Any) -> float | None:
    """A JSON number as float; None for null, strings and booleans."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


async def maybe(fetch: Fetch, odata_id: str | None, static: bool = False) -> dict[str, Any] | None:
    """The linked resource, or None where the link is absent (an optional resource)."""
    return None if odata_id is None else await fetch(odata_id, static)


async def collection(fetch: Fetch, odata_id: str | None, static: bool = False) -> list[dict[str, Any]]:
    """Every member resource of a linked collection (itself structural), fetched concurrently."""
    if odata_id is None:
        return []
    return list(await asyncio.gather(*(fetch(i, static) for i in members(await fetch(odata_id, True)))))
