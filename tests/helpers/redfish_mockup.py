"""An aiohttp Redfish service serving DMTF mockup directories as they are stored: the resource
``/redfish/v1/<path>`` is ``<mockup>/<path>/index.json``. Several devices share one port under
path prefixes (``/<prefix>/redfish/v1/...``), the way the simulator serves a cluster. Devices can be
told to misbehave (hang before or after the headers, trickle the body, HTTP 500, broken JSON), to
answer slowly, to flap between modes (``mode_of``), or to require basic auth."""
from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from aiohttp import ClientConnectionResetError, web

MODES = ("ok", "hang", "500", "badjson", "stall", "trickle")
TRICKLE_S = 0.5   # between two bytes of a trickled body


@dataclass
class Device:
    mockup: Path
    mode: str = "ok"
    latency_s: float = 0.0
    basic_auth: tuple[str, str] | None = None
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0  # the most requests it was serving at once
    mode_of: Callable[[], str] | None = None  # flapping: asked for the mode at each request

    def current_mode(self) -> str:
        mode = self.mode if self.mode_of is None else self.mode_of()
        assert mode in MODES, mode
        return mode


class MockupService:
    def __init__(self) -> None:
        self.devices: dict[str, Device] = {}
        self._cache: dict[Path, bytes] = {}

    def add(self, prefix: str, mockup: Path, **options) -> Device:
        """``prefix`` "" serves the device at ``/redfish/v1`` (a real BMC); otherwise ``/<prefix>/redfish/v1``."""
        device = Device(Path(mockup), **options)
        assert device.mode in MODES, device.mode
        self.devices[prefix] = device
        return device

    def _route(self, path: str) -> tuple[Device, str] | None:
        first, _, rest = path.lstrip("/").partition("/")
        if first == "redfish" and "" in self.devices:
            return self.devices[""], path
        if first in self.devices:
            return self.devices[first], "/" + rest
        return None

    def _body(self, device: Device, resource: str) -> bytes | None:
        relative = resource.removeprefix("/redfish/v1").strip("/")
        file = device.mockup / relative / "index.json"
        if ".." in relative.split("/") or not file.is_file():
            return None
        if file not in self._cache:
            self._cache[file] = file.read_bytes()
        return self._cache[file]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        found = self._route(request.path)
        if found is None:
            raise web.HTTPNotFound()
        device, resource = found
        device.requests += 1
        device.in_flight += 1
        device.max_in_flight = max(device.max_in_flight, device.in_flight)
        try:
            return await self._answer(request, device, resource)
        finally:
            device.in_flight -= 1

    async def _answer(self, request: web.Request, device: Device, resource: str) -> web.StreamResponse:
        if device.latency_s:
            await asyncio.sleep(device.latency_s)
        if device.basic_auth is not None:
            user, password = device.basic_auth
            expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if request.headers.get("Authorization") != expected:
                return web.json_response({"error": "unauthorized"}, status=401)
        mode = device.current_mode()
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "500":
            return web.json_response({"error": {"code": "Base.1.0.InternalError"}}, status=500)
        body = self._body(device, resource)
        if body is None:
            return web.json_response({"error": {"code": "Base.1.0.ResourceMissingAtURI"}}, status=404)
        if mode == "badjson":
            body = body[: len(body) // 2]  # a response cut off mid-object
        if mode in ("stall", "trickle"):
            return await self._slow_body(request, body, mode)
        return web.Response(body=body, content_type="application/json")

    @staticmethod
    async def _slow_body(request: web.Request, body: bytes, mode: str) -> web.StreamResponse:
        """The status line and headers at once (Content-Length announced), then nothing ("stall", a BMC
        web server wedged after the headers) or one byte at a time ("trickle")."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(body)
        try:
            await response.prepare(request)
            if mode == "stall":
                await asyncio.sleep(3600)
            for i in range(len(body)):
                await response.write(body[i:i + 1])
                await asyncio.sleep(TRICKLE_S)
        except ClientConnectionResetError:   # the client gave up (its timeout): as a BMC would, stop
            pass
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app
