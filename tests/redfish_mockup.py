"""An aiohttp Redfish service serving DMTF mockup directories as they are stored: the resource
``/redfish/v1/<path>`` is ``<mockup>/<path>/index.json``. Several devices share one port under
path prefixes (``/<prefix>/redfish/v1/...``), the way the simulator serves a cluster. Devices can be
told to misbehave (hang, HTTP 500, broken JSON), to answer slowly, or to require basic auth."""
from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

MODES = ("ok", "hang", "500", "badjson")


@dataclass
class Device:
    mockup: Path
    mode: str = "ok"
    latency_s: float = 0.0
    basic_auth: tuple[str, str] | None = None
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0  # the most requests it was serving at once


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
        if device.mode == "hang":
            await asyncio.sleep(3600)
        if device.mode == "500":
            return web.json_response({"error": {"code": "Base.1.0.InternalError"}}, status=500)
        body = self._body(device, resource)
        if body is None:
            return web.json_response({"error": {"code": "Base.1.0.ResourceMissingAtURI"}}, status=404)
        if device.mode == "badjson":
            body = body[: len(body) // 2]  # a response cut off mid-object
        return web.Response(body=body, content_type="application/json")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app
