"""A fake storage system serving recorded answers over HTTP (aiohttp, in process): each target a path
prefix ``/<name>`` answering its kind's endpoint (MinIO's bucket metrics, ceph-exporter's /metrics, VAST VMS's
/api/prometheusmetrics/) with the recorded (VAST: constructed) body, or hanging, or sending garbage. A VAST target
also answers VMS's per-view /api/prometheusmetrics/views where given a views body (its own mode: answer, hang,
garbage), and 404 where not, as a VMS without that endpoint.
The bearer token, where given, is checked as the real MinIO checks its Prometheus endpoint's JWT; a username and
password, as VMS checks basic auth (401 with a challenge when wrong or missing)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from lockstep.exporters.toolkit.basicauth import parse_basic
from tests.helpers.paths import FIXTURES

MINIO_BUCKET = (FIXTURES / "minio" / "bucket-metrics.prom").read_text()
CEPH_RGW = (FIXTURES / "ceph-rgw" / "exporter-metrics.prom").read_text()
VAST = (FIXTURES / "vast" / "prometheusmetrics-cluster.prom").read_text()
VAST_VIEWS = (FIXTURES / "vast" / "prometheusmetrics-views.prom").read_text()
# each kind's endpoint, less its leading /
PATHS = {"minio": "minio/v2/metrics/bucket", "ceph-rgw": "metrics", "vast": "api/prometheusmetrics/"}
VIEWS_PATH = "api/prometheusmetrics/views"   # VAST's per-view endpoint


def two_servers(answer: str) -> str:
    """The recorded answer as a two-server MinIO gives it: every per-server series once more for a second
    server (usage series are the answering node's only, cmd/metrics-v2.go; kept once)."""
    extra = [line.replace('server="127.0.0.1:9000"', 'server="127.0.0.2:9000"') for line in answer.splitlines()
             if line.startswith(("minio_bucket_requests", "minio_bucket_traffic"))]
    return answer + "\n".join(extra) + "\n"


@dataclass
class Behaviour:
    body: str = MINIO_BUCKET
    mode: str = "answer"  # answer | hang | garbage | status
    token: str | None = None
    status: int = 200
    kind: str = "minio"
    basic: tuple[str, str] | None = None   # (username, password) the system requires
    views: str | None = None   # VAST: the body of /api/prometheusmetrics/views (None: 404, a VMS without it)
    views_mode: str = "answer"   # answer | hang | garbage


class FakeStorage:
    def __init__(self) -> None:
        self.targets: dict[str, Behaviour] = {}
        self.requests: dict[str, int] = {}        # of each target's kind's endpoint
        self.views_requests: dict[str, int] = {}  # of a VAST target's views
        self.hung = asyncio.Event()  # set at teardown to let hung handlers go

    def add(self, name: str, behaviour: Behaviour | None = None) -> None:
        self.targets[name] = behaviour or Behaviour()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        b = self.targets.get(name)
        views = b is not None and b.kind == "vast" and request.match_info["rest"] == VIEWS_PATH
        if b is None or (request.match_info["rest"] != PATHS[b.kind] and not views):
            raise web.HTTPNotFound()
        counts = self.views_requests if views else self.requests
        counts[name] = counts.get(name, 0) + 1
        if b.token is not None and request.headers.get("Authorization") != f"Bearer {b.token}":
            raise web.HTTPForbidden(text="Access Denied.")
        # decoded as a server reads the header (the exporters' own server-side parser), not by the client's encoder,
        # which the fake would then only echo
        if b.basic is not None and parse_basic(request.headers.get("Authorization", "")) != (b.basic[0],
                                                                                              b.basic[1].encode()):
            raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Basic realm="api"'})
        if views and b.views is None:
            raise web.HTTPNotFound()
        mode, body = (b.views_mode, b.views) if views else (b.mode, b.body)
        if mode == "hang":
            await self.hung.wait()
        if mode == "garbage":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>\n", content_type="text/html")
        if mode == "status":
            return web.Response(status=b.status, text="error\n")
        return web.Response(text=body, content_type="text/plain")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{name}/{rest:.*}", self._handle)
        return app
