"""Redfish over HTTP: GET one resource by its ``@odata.id`` on a shared aiohttp ClientSession.

Every URL is ``target.url + @odata.id`` (the target URL may carry a path prefix, as the simulator's
per-device services do). Only service-relative ids (``/redfish/v1/...``) are followed: an absolute
link to another host (a PSU's ``Links.Outlet`` on its PDU) would send this target's credentials
elsewhere.

The same holds for redirects: one to another origin (scheme, host, port) is refused, one within the
BMC's origin is followed at most ``MAX_REDIRECTS`` times, and a loop is reported as one. A body is
read up to ``MAX_BODY_BYTES``: a broken or hostile BMC answering hundreds of MiB must cost this
target its poll, not the exporter its memory (the systemd unit's MemoryMax would kill it for every
rack)."""
from __future__ import annotations

import asyncio
import math
import ssl
from typing import Any, Awaitable, Callable, Iterable, Protocol, Sequence, TypeVar
from urllib.parse import urljoin, urlsplit

import aiohttp

from lockstep.exporters.power import pollreport
from lockstep.exporters.power.config import Target
from lockstep.exporters.toolkit.jsonload import load_json

SERVICE_ROOT = "/redfish/v1/"
# Requests in flight to one device at a time: embedded BMC/PDU web servers serve few connections
# and answer 503 when pushed (the collections of a PDU hold dozens of outlets).
PER_TARGET_REQUESTS = 4
# A large Redfish document (a 48-outlet PDU's collection, a Sensors collection of 500 members) is
# tens of KiB; 4 MiB leaves room for any real one.
MAX_BODY_BYTES = 4 << 20
MAX_REDIRECTS = 5
# What one poll of a target may read in all (a real device's poll reads tens of KiB), and what its
# structure cache may hold between polls: a BMC answering every chassis with a document just under
# MAX_BODY_BYTES must cost its own poll, not the exporter's memory for every rack. Past the first,
# the poll fails; past the second, a structural document is read again at each poll instead of kept.
MAX_POLL_BYTES = 8 << 20
MAX_STRUCTURE_BYTES = 1 << 20
# The most items of one JSON array a poll reads (a collection's Members, a chassis' PowerSupplies, a
# CDU's detector groups): more than a device lists (an HGX baseboard's BMC lists about 50 chassis, the
# largest rack PDUs about 54 outlets), and few enough that a BMC listing a hundred thousand chassis in
# one answer under MAX_BODY_BYTES costs its poll a bounded number of requests. The rest is counted as
# skipped (``pollreport``), exported per target and logged.
MAX_MEMBERS = 256
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class Fetch(Protocol):
    """GET one resource. ``static=True`` marks a structural resource (service root, collections,
    chassis and PDU documents followed only for their links): it may come from the per-target
    structure cache instead of the wire."""

    def __call__(self, odata_id: str, static: bool = False) -> Awaitable[dict[str, Any]]: ...


class RedfishError(Exception):
    """A failed GET; the message names the resource, never a credential. ``layout_changed``: the
    failure says the discovered structure is out of date (a 404, a link gone), so rediscover it."""

    def __init__(self, message: str, layout_changed: bool = False) -> None:
        super().__init__(message)
        self.layout_changed = layout_changed


class Structure(dict):
    """A target's structure cache (``@odata.id`` -> document) and the bytes of the answers it holds."""

    held_bytes: int = 0


class Redfish(Protocol):
    def fetcher(self, target: Target, timeout_s: float, structure: Structure) -> Fetch: ...


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
        self._gates: dict[str, asyncio.Semaphore] = {}

    def _ssl_for(self, target: Target) -> ssl.SSLContext | bool:
        if not target.tls_verify:
            return False  # explicit per-target opt-out (self-signed BMC certificates)
        if target.ca_file is None:
            return True
        if target.ca_file not in self._ssl:
            self._ssl[target.ca_file] = ssl.create_default_context(cafile=target.ca_file)
        return self._ssl[target.ca_file]

    def gate(self, target: Target) -> asyncio.Semaphore:
        """The target's request limit, shared by every poll of it (background rounds and any number
        of concurrent /probe calls): it lives as long as the target, not as one poll."""
        gate = self._gates.get(target.name)
        if gate is None:
            gate = self._gates[target.name] = asyncio.Semaphore(PER_TARGET_REQUESTS)
        return gate

    def fetcher(self, target: Target, timeout_s: float, structure: Structure) -> Fetch:
        """GETs for one poll of ``target``, within its MAX_POLL_BYTES."""
        headers = {"Accept": "application/json"}
        if target.credentials:
            headers["Authorization"] = target.credentials.basic_header()
        tls = self._ssl_for(target)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        gate = self.gate(target)
        read = [0]  # bytes of the answers this poll has read

        async def get_hop(url: str) -> tuple[str | None, bytes]:
            """(redirect location, b"") or (None, body) for one request."""
            async with gate, self.session.get(url, ssl=tls, timeout=timeout, raise_for_status=True,
                                              headers=headers, allow_redirects=False) as response:
                if response.status in _REDIRECTS:
                    return response.headers.get("Location", ""), b""
                body = await read_capped(response)
            read[0] += len(body)
            if read[0] > MAX_POLL_BYTES:
                raise RedfishError(f"the answers of one poll exceed {MAX_POLL_BYTES >> 20} MiB")
            return None, body

        async def get_once(url: str) -> tuple[dict[str, Any], int]:
            seen = {url}
            location, body = await get_hop(url)
            while location is not None:
                url = next_hop(url, location, seen)
                location, body = await get_hop(url)
            return decode(body), len(body)

        async def fetch(odata_id: str, static: bool = False) -> dict[str, Any]:
            if not odata_id.startswith("/redfish/v1"):
                raise RedfishError(f"refusing to follow non-service link {odata_id!r}")
            if static and odata_id in structure:
                return structure[odata_id]
            url = target.url + odata_id
            for attempt in range(self.retries + 1):
                try:
                    doc, size = await get_once(url)
                    if static and structure.held_bytes + size <= MAX_STRUCTURE_BYTES:
                        structure[odata_id] = doc
                        structure.held_bytes += size
                    return doc
                except RedfishError as exc:
                    raise RedfishError(f"GET {odata_id}: {exc}") from None
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    if attempt == self.retries or not _retryable(exc):
                        gone = isinstance(exc, aiohttp.ClientResponseError) and exc.status in (404, 410)
                        raise RedfishError(f"GET {odata_id}: {_describe(exc)}", gone) from None
                    await asyncio.sleep(self.backoff_s * 2 ** attempt)
            raise AssertionError("unreachable")

        return fetch


async def read_capped(response: aiohttp.ClientResponse, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused past ``limit`` bytes (announced by Content-Length or found while reading)."""
    if (response.content_length or 0) > limit:
        raise RedfishError(f"body of {response.content_length} bytes exceeds the {limit}-byte limit")
    chunks, size = [], 0
    while chunk := await response.content.read(65536):
        size += len(chunk)
        if size > limit:
            raise RedfishError(f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def next_hop(url: str, location: str, seen: set[str]) -> str:
    """Where a redirect from ``url`` leads, if it may be followed: same origin, no loop, few hops."""
    target = urljoin(url, location)
    here, there = urlsplit(url), urlsplit(target)
    if not location or (here.scheme, here.hostname, here.port) != (there.scheme, there.hostname, there.port):
        # Following it would send this target's credentials elsewhere (a blind SSRF for whoever
        # controls the BMC's answers).
        raise RedfishError(f"redirect to another origin refused ({there.scheme}://{there.hostname})")
    if target in seen:
        raise RedfishError(f"redirect loop at {there.path}")
    if len(seen) > MAX_REDIRECTS:
        raise RedfishError(f"more than {MAX_REDIRECTS} redirects")
    seen.add(target)
    return target


def decode(body: bytes) -> dict[str, Any]:
    try:
        doc = load_json(body)
    except ValueError as exc:
        raise RedfishError(f"malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RedfishError(f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _describe(exc: Exception) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"HTTP {exc.status}"
    return f"{type(exc).__name__}: {exc}"


# A property of the wrong JSON type (``"Status": "OK"``, a non-list ``Members``, a numeric
# ``@odata.id``) reads as absent through these, so it loses that one reading, not the target.
def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def array(value: Any, where: str = "") -> list[Any]:
    """``value`` if it is a JSON array, else an empty one; its first MAX_MEMBERS items, the others
    reported to the poll as skipped (``where`` names the array in the log)."""
    if not isinstance(value, list):
        return []
    if len(value) > MAX_MEMBERS:
        pollreport.skipped_members(len(value) - MAX_MEMBERS, where)
        return value[:MAX_MEMBERS]
    return value


def text(value: Any, default: str = "") -> str:
    """A string property (an ``Id``, a ``MemberId``: some services send integers) as a label value."""
    if isinstance(value, bool):
        return default
    return str(value) if isinstance(value, (str, int)) else default


def odata_id(value: Any) -> str | None:
    """The ``@odata.id`` of a reference object, when it is a string."""
    ref = obj(value).get("@odata.id")
    return ref if isinstance(ref, str) else None


def link(doc: dict[str, Any], key: str) -> str | None:
    """``doc[key]["@odata.id"]`` when the resource links it."""
    return odata_id(obj(doc).get(key))


def members(doc: dict[str, Any]) -> list[str]:
    """The ``@odata.id`` of each member of a collection, in the service's order (at most MAX_MEMBERS)."""
    where = obj(doc).get("@odata.id")
    listed = array(obj(doc).get("Members"), where if isinstance(where, str) else "Members")
    return [ref for m in listed if (ref := odata_id(m)) is not None]


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
    return number_at(value, field)


def number_at(doc: Any, key: str) -> float | None:
    """``doc[key]`` as a float (``number``). A number there that is not a finite one is reported to the
    poll as an invalid reading, once per poll however often the fallback order reads it."""
    value = doc.get(key) if isinstance(doc, dict) else None
    result = number(value)
    if result is None and isinstance(value, (int, float)) and not isinstance(value, bool):
        pollreport.invalid_reading(doc, key)
    return result


def number(value: Any) -> float | None:
    """A JSON number as float; None for null, strings and booleans. A number that is not finite (NaN,
    Infinity and -Infinity, which Python's JSON decoder accepts, 1e999, which it reads as infinity) or
    an integer past a float's range is no reading either: one such value would turn every sum it
    enters (a rack's power) into NaN or infinity."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


async def gather(*aws: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather``, except that the first failure cancels the rest and waits for them: a failed
    poll leaves no request running against the BMC (``asyncio.gather`` lets siblings run on, holding
    the target's request slots into its next poll)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        await _cancel(tasks)
        # The exception's traceback holds this frame, and a failed task holds the exception: a cycle
        # that kept every task (and the documents in its frames) until the garbage collector's oldest
        # generation ran, past many more polls of a failing target.
        tasks.clear()
        raise


async def _cancel(tasks: list[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


T = TypeVar("T")
R = TypeVar("R")


async def each(fn: Callable[[T], Awaitable[R]], items: Sequence[T], workers: int = PER_TARGET_REQUESTS) -> list[R]:
    """``[await fn(item) for item in items]``, ``workers`` at a time, results in order: a task per
    worker, never one per item (each holds a coroutine and, soon, a request waiting for the target's
    gate). The first failure cancels the rest and waits for them, as ``gather`` does."""
    results: list[Any] = [None] * len(items)
    queue = iter(enumerate(items))

    async def work() -> None:
        for i, item in queue:
            results[i] = await fn(item)

    await gather(*(work() for _ in range(min(workers, len(items)))))
    return results


async def maybe(fetch: Fetch, odata_id: str | None, static: bool = False) -> dict[str, Any] | None:
    """The linked resource, or None where the link is absent (an optional resource)."""
    return None if odata_id is None else await fetch(odata_id, static)


async def collection(fetch: Fetch, odata_id: str | None, static: bool = False) -> list[dict[str, Any]]:
    """Every member resource of a linked collection (itself structural), fetched concurrently (``each``)."""
    if odata_id is None:
        return []
    return await each(lambda i: fetch(i, static), members(await fetch(odata_id, True)))
