"""Analytics and the monthly report against a REAL Prometheus that demands TLS with a client certificate
and basic auth (its own ``--web.config.file``), and against a Mimir-like gateway in front of it that
demands a bearer token and a tenant header: the credentials work, rotate without a restart, and never
show in what lockstep prints or serves."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from lockstep.analytics.prom.auth import PromAuth
from lockstep.analytics.service.app import create_app
from lockstep.analytics.service.keys import STATE
from lockstep.stack import Stack, start_on_port, start_prometheus
from tests.helpers.analytics_service import PROM_CONFIG, next_refresh, service_config
from tests.helpers.paths import REPO
from tests.helpers.tls import write_server_tls

pytestmark = pytest.mark.integration
PASSWORD, TOKEN = "pw-6c1f0e-first", "tok-7d2a91-first"


def _hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    client = write_server_tls(d).issue_cert("lockstep-analytics")
    client.cert_chain_pems[0].write_to_path(d / "client.crt")
    client.private_key_pem.write_to_path(d / "client.key")
    (d / "password").write_text(PASSWORD + "\n")
    return d


def _web_config(pki: Path, password: str) -> dict:
    return {"tls_server_config": {"cert_file": str(pki / "server.crt"), "key_file": str(pki / "server.key"),
                                  "client_auth_type": "RequireAndVerifyClientCert",
                                  "client_ca_file": str(pki / "ca.crt")},
            "basic_auth_users": {"lockstep": _hash(password)}}


@pytest.fixture(scope="module")
def secure(service_datadir, pki, tmp_path_factory):
    work = tmp_path_factory.mktemp("secure-prom")
    shutil.copytree(service_datadir / "data", work / "data")
    with Stack() as stack:
        yield stack.add(start_prometheus(PROM_CONFIG, work, web_config=_web_config(pki, PASSWORD)))


def _light(url: str, service_sim, auth: PromAuth):
    """The service's test config with a one-minute window: these tests are about the requests, not the scores."""
    return dataclasses.replace(service_config(url, service_sim), window_s=60.0, prometheus_auth=auth)


def _auth(pki: Path, **kw) -> PromAuth:
    return PromAuth(**{"username": "lockstep", "password_file": str(pki / "password"), "ca_file": str(pki / "ca.crt"),
                       "cert_file": str(pki / "client.crt"), "key_file": str(pki / "client.key"), **kw})


async def test_scores_read_through_tls_client_certificate_and_basic_auth(secure, pki, service_sim,
                                                                        aiohttp_client):
    assert secure.url.startswith("https://")
    app = create_app(dataclasses.replace(service_config(secure.url, service_sim), prometheus_auth=_auth(pki)))
    client = await aiohttp_client(app)
    await next_refresh(app)
    assert app[STATE].health.up, app[STATE].health.last_error
    (s,) = service_sim.truth["stragglers"]
    body = await (await client.get("/api/v1/jobs/7300")).json()
    assert [(g["node"], g["gpu"]) for g in body["data"]["stragglers"]] == [(s["node"], s["gpu"])]
    page = await (await client.get("/")).text()
    assert "basic auth as lockstep" in page and PASSWORD not in page


@pytest.mark.parametrize("change,expect", [
    ({"password_file": "wrong"}, "401"),
    ({"cert_file": None, "key_file": None}, "certificate"),   # no client certificate: the handshake fails
    ({"ca_file": None}, "certificate verify failed"),         # the server's CA is not the system's
])
async def test_each_missing_credential_is_refused_and_reported(secure, pki, service_sim, aiohttp_client, tmp_path,
                                                              change, expect):
    if change.get("password_file") == "wrong":
        (tmp_path / "wrong").write_text("not-the-password\n")
        change = {"password_file": str(tmp_path / "wrong")}
    app = create_app(_light(secure.url, service_sim, _auth(pki, **change)))
    client = await aiohttp_client(app)
    await next_refresh(app)
    body = await (await client.get("/api/v1/jobs")).json()
    assert body["up"] is False and expect in body["last_error"], body["last_error"]
    assert "not-the-password" not in body["last_error"]


def _replace(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def test_a_rotated_password_is_read_without_a_restart(service_datadir, pki, service_sim, tmp_path, stack,
                                                           aiohttp_client):
    """Prometheus re-reads its web config on every request: both sides change, analytics keeps reading."""
    shutil.copytree(service_datadir / "data", tmp_path / "data")
    prom = stack.add(start_prometheus(PROM_CONFIG, tmp_path, web_config=_web_config(pki, PASSWORD)))
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    app = create_app(_light(prom.url, service_sim, _auth(pki, password_file=str(password))))
    await aiohttp_client(app)
    await next_refresh(app)
    assert app[STATE].health.up, app[STATE].health.last_error
    _replace(tmp_path / "web.yml", json.dumps(_web_config(pki, "pw-second")))
    _replace(password, "pw-second\n")
    await _up_after_change(app)
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    async with aiohttp.ClientSession() as session:   # the old password is refused now: the rotation was real
        old = {"Authorization": aiohttp.encode_basic_auth("lockstep", PASSWORD)}
        assert (await session.get(prom.url + "/api/v1/query?query=1", headers=old, ssl=ctx)).status == 401


async def _up_after_change(app) -> None:
    """Wait for a refresh that began after a change of credentials (one already under way may fail) and
    succeeded."""
    changed = time.time()
    for _ in range(10):
        await next_refresh(app)
        health = app[STATE].health
        if health.up and health.last_success - health.duration_s > changed:
            return
    pytest.fail(f"no successful refresh after the change: {app[STATE].health.last_error}")


def _gateway(upstream: str, pki: Path, token_file: Path, seen: list[str]) -> web.Application:
    """A Mimir-like authenticating gateway: wants ``Authorization: Bearer <the token in token_file>`` and
    ``X-Scope-OrgID``; refuses with the presented token echoed in its error, as a careless proxy does."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))

    async def handle(request: web.Request) -> web.Response:
        got = request.headers.get("Authorization", "")
        seen.append(got)
        if request.headers.get("X-Scope-OrgID") != "tenant-a":
            return web.json_response({"status": "error", "errorType": "unauthorized", "error": "no org id"}, status=401)
        if got != f"Bearer {token_file.read_text().strip()}":
            return web.json_response({"status": "error", "errorType": "unauthorized",
                                      "error": f"invalid credentials {got!r}"}, status=401)
        async with aiohttp.ClientSession(headers={"Authorization": aiohttp.encode_basic_auth("lockstep", PASSWORD)}) \
                as session:
            async with session.request(request.method, upstream + request.path, params=request.query,
                                       data=await request.read(), headers={"Content-Type": request.content_type},
                                       ssl=ctx) as resp:
                return web.Response(body=await resp.read(), status=resp.status, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)   # range queries are POSTed
    return app


def _projected(directory: Path, token: str, generation: int) -> Path:
    """Write ``token`` the way the kubelet projects a service-account token: a new timestamped directory,
    then the ``..data`` link swapped atomically; ``token`` is a link through ``..data``."""
    stamp = directory / f"..2026_11_0{generation}"
    stamp.mkdir()
    (stamp / "token").write_text(token)
    os.symlink(stamp.name, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", directory / "..data")
    if not (directory / "token").is_symlink():
        os.symlink("..data/token", directory / "token")
    return directory / "token"


async def test_a_rotated_bearer_token_is_read_without_a_restart(secure, pki, service_sim, tmp_path, aiohttp_server,
                                                               aiohttp_client):
    expected, seen = tmp_path / "expected-token", []
    expected.write_text(TOKEN)
    gateway = await aiohttp_server(_gateway(secure.url, pki, expected, seen))
    token = _projected(tmp_path, TOKEN, 1)
    auth = PromAuth(bearer_token_file=str(token), headers=(("X-Scope-OrgID", "tenant-a"),))
    app = create_app(_light(str(gateway.make_url("")).rstrip("/"), service_sim, auth))
    client = await aiohttp_client(app)
    await next_refresh(app)
    assert app[STATE].health.up, app[STATE].health.last_error
    expected.write_text("tok-second")
    _projected(tmp_path, "tok-second", 2)
    await _up_after_change(app)
    seen.clear()
    await _up_after_change(app)
    assert set(seen) == {"Bearer tok-second"}
    # the gateway now wants a token the file does not hold: refused, and its echo of the token redacted
    expected.write_text("tok-third")
    await next_refresh(app)
    body = await (await client.get("/api/v1/jobs")).json()
    assert body["up"] is False and "<redacted>" in body["last_error"], body["last_error"]
    assert "tok-second" not in json.dumps(body) and "tok-second" not in await (await client.get("/")).text()


async def test_serve_redacts_the_token_in_its_logs_and_pages(secure, pki, service_sim, tmp_path, aiohttp_server):
    expected, seen = tmp_path / "expected-token", []
    expected.write_text("what-the-gateway-wants")
    gateway = await aiohttp_server(_gateway(secure.url, pki, expected, seen))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    argv = [sys.executable, "-m", "lockstep", "analytics", "serve", "--prometheus-url", str(gateway.make_url("")),
            "--prometheus-bearer-token-file", str(token), "--prometheus-header", "X-Scope-OrgID: tenant-a",
            "--interval", "1", "--log.level", "debug"]
    service = await asyncio.to_thread(start_on_port, "analytics", lambda port: [
        *argv, "--web.listen-address", f"127.0.0.1:{port}"], tmp_path / "logs", ready_path="/-/healthy")
    try:
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as session:
            while "refresh failed" not in service.log_tail(200):
                assert time.monotonic() < deadline and service.alive(), service.log_tail()
                await asyncio.sleep(0.2)
            pages = [await (await session.get(f"{service.url}{path}")).text() for path in ("/", "/api/v1/jobs")]
    finally:
        service.stop()
    log = service.log_tail(1000)
    assert f"Bearer {TOKEN}" in seen                        # it was sent, and the gateway echoed it
    assert "<redacted>" in log and "<redacted>" in pages[1]
    assert all(TOKEN not in text for text in (log, *pages))
    assert "bearer token from" in pages[0] and "X-Scope-OrgID" in pages[0]


@pytest.mark.parametrize("command", [["analytics", "serve"], ["report", "monthly", "--month", "2026-01", "--out", "x"],
                                     ["analytics", "evaluate", "--from", "0", "--to", "60"]])
def test_credentials_in_the_url_are_refused_naming_the_file_flags(command, capsys):
    from lockstep.cli import main

    assert main([*command, "--prometheus-url", "https://admin:hunter2@127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "--prometheus-password-file" in err and "--prometheus-bearer-token-file" in err


def test_report_monthly_through_tls_client_certificate_and_basic_auth(secure, pki, service_sim, tmp_path):
    month = datetime.fromtimestamp(service_sim.start, timezone.utc).strftime("%Y-%m")
    common = [sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", secure.url, "--month", month,
              "--prometheus-username", "lockstep", "--prometheus-ca-file", str(pki / "ca.crt"),
              "--prometheus-cert-file", str(pki / "client.crt"), "--prometheus-key-file", str(pki / "client.key")]
    ok = subprocess.run([*common, "--prometheus-password-file", str(pki / "password"), "--out", str(tmp_path / "ok")],
                        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert "7300" in (tmp_path / "ok" / "gpu_hours_by_job.csv").read_text()
    (tmp_path / "wrong").write_text("not-the-password")
    bad = subprocess.run([*common, "--prometheus-password-file", str(tmp_path / "wrong"),
                          "--out", str(tmp_path / "no")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("lockstep report:")]
    assert "HTTP 401" in line and "password from" in line and "not-the-password" not in bad.stderr


def test_a_post_mortem_through_tls_client_certificate_and_basic_auth(secure, pki, service_sim, tmp_path):
    """``lockstep analytics evaluate --prometheus-url`` takes the same flags as serve and the report."""
    common = [sys.executable, "-m", "lockstep", "analytics", "evaluate", "--prometheus-url", secure.url,
              "--from", str(service_sim.start), "--to", str(service_sim.start + 300), "--json",
              "--prometheus-username", "lockstep", "--prometheus-ca-file", str(pki / "ca.crt"),
              "--prometheus-cert-file", str(pki / "client.crt"), "--prometheus-key-file", str(pki / "client.key")]
    ok = subprocess.run([*common, "--prometheus-password-file", str(pki / "password")],
                        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert "7300" in json.loads(ok.stdout)["jobs"]
    (tmp_path / "wrong").write_text("not-the-password")
    bad = subprocess.run([*common, "--prometheus-password-file", str(tmp_path / "wrong")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("lockstep analytics evaluate:")]
    assert "HTTP 401" in line and "not-the-password" not in bad.stderr
