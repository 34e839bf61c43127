"""Power exporter transport: basic auth from credential files, TLS verification with a per-target
opt-out, the IPMI tool as a subprocess, and the real `lockstep power-exporter` process."""
from __future__ import annotations

import asyncio
import os
import re
import ssl
import stat
import sys
import time

import aiohttp
import pytest
import trustme
from aiohttp import web

from lockstep.exporters.power.app import POLLER, AppOptions, create_app
from lockstep.exporters.power.config import load_config
from lockstep.exporters.toolkit.credentials import basic_auth
from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, target, value, write_config
from tests.helpers.redfish_mockup import MockupService

SERVER = FIXTURES / "redfish/public-rackmount1"


async def scrape_once(aiohttp_client, config_path) -> dict:
    client = await aiohttp_client(create_app(load_config(config_path), AppOptions(background=False)))
    await client.app[POLLER].poll_all()
    return parse(await (await client.get("/metrics")).text())


async def test_basic_auth_with_credentials_from_files(aiohttp_server, aiohttp_client, tmp_path):
    svc = MockupService()
    svc.add("", SERVER, basic_auth=("monitor", "s3cr3t pass"))
    server = await aiohttp_server(svc.app())
    (tmp_path / "user").write_text("monitor\n")
    (tmp_path / "pass").write_text("s3cr3t pass\n")
    (tmp_path / "wrong").write_text("guess\n")
    url = str(server.make_url("")).rstrip("/")
    creds = "    username_file: user\n    password_file: {}\n"
    values = await scrape_once(aiohttp_client, write_config(tmp_path, url, [
        target("good", "bmc", url, extra=creds.format("pass")), target("bad", "bmc", url, extra=creds.format("wrong"))]))
    assert value(values, "lockstep_redfish_up", target="good") == 1
    assert value(values, "lockstep_redfish_up", target="bad") == 0
    assert value(values, "lockstep_chassis_power_watts", target="good") == 374


@pytest.fixture
async def tls_service(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    svc = MockupService()
    svc.add("", SERVER)
    runner = web.AppRunner(svc.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    yield f"https://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_tls_verified_by_default_with_per_target_opt_out(tls_service, aiohttp_client, tmp_path):
    url = tls_service
    values = await scrape_once(aiohttp_client, write_config(tmp_path, url, [
        target("strict", "bmc", url), target("own-ca", "bmc", url, extra="    ca_file: ca.pem\n"),
        target("opt-out", "bmc", url, extra="    tls_verify: false\n")]))
    assert value(values, "lockstep_redfish_up", target="strict") == 0  # unknown CA: refused
    assert value(values, "lockstep_redfish_up", target="own-ca") == 1
    assert value(values, "lockstep_redfish_up", target="opt-out") == 1


def fake_ipmitool(tmp_path, text_file, exit_code=0, sleep_s=0):
    """A stand-in for ipmitool (no BMC answers IPMI here): records argv and IPMI_PASSWORD, prints the text."""
    script = tmp_path / "ipmitool"
    script.write_text(f"#!{sys.executable}\nimport os, sys, time\n"
                      f"open({str(tmp_path / 'argv')!r}, 'w').write(repr(sys.argv) + os.environ.get('IPMI_PASSWORD', ''))\n"
                      f"time.sleep({sleep_s})\nsys.stdout.write(open({str(text_file)!r}).read())\nsys.exit({exit_code})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.integration
async def test_ipmi_target_runs_the_tool(aiohttp_client, tmp_path):
    good = fake_ipmitool(tmp_path, FIXTURES / "ipmi/ipmitool-1.8.18.txt")
    (tmp_path / "u").write_text("admin")
    (tmp_path / "p").write_text("ipmi-pw")
    extra = f"    ipmi_tool: {good}\n    username_file: u\n    password_file: p\n"
    values = await scrape_once(aiohttp_client, write_config(tmp_path, "", [
        target("n1", "ipmi", "ipmi://127.0.0.1:6230", extra=extra)], timeout_s=5))
    assert value(values, "lockstep_chassis_power_watts", target="n1") == 196
    argv_and_env = (tmp_path / "argv").read_text()
    assert argv_and_env.endswith("]ipmi-pw") and "ipmi-pw" not in argv_and_env[:-len("ipmi-pw")]


@pytest.mark.integration
async def test_ipmi_deactivated_reading_and_hung_tool_are_down(aiohttp_client, tmp_path):
    off = fake_ipmitool(tmp_path, FIXTURES / "ipmi/ipmitool-deactivated.txt")
    values = await scrape_once(aiohttp_client, write_config(tmp_path, "", [
        target("idle", "ipmi", "local", extra=f"    ipmi_tool: {off}\n")]))
    assert value(values, "lockstep_redfish_up", target="idle") == 0
    assert ("lockstep_chassis_power_watts", (("target", "idle"),)) not in values
    (tmp_path / "slow").mkdir()
    hung = fake_ipmitool(tmp_path / "slow", FIXTURES / "ipmi/ipmi-dcmi.txt", sleep_s=30)
    values = await scrape_once(aiohttp_client, write_config(tmp_path, "", [
        target("hung", "ipmi", "local", extra=f"    ipmi_tool: {hung}\n")], timeout_s=0.5))
    assert value(values, "lockstep_redfish_up", target="hung") == 0


@pytest.mark.integration
async def test_power_exporter_process_polls_in_background(aiohttp_server, tmp_path):
    svc = MockupService()
    svc.add("node00", SERVER, basic_auth=("root", "hunter2-secret"))
    svc.add("dead", SERVER, mode="500")
    server = await aiohttp_server(svc.app())
    base = str(server.make_url("")).rstrip("/")
    creds = "    username_env: BMC_USER\n    password_env: BMC_PASS\n"
    config = write_config(tmp_path, base, [target("node00", "bmc", f"{base}/node00", extra=creds),
                                           target("dead", "bmc", f"{base}/dead")])
    env = dict(os.environ, BMC_USER="root", BMC_PASS="hunter2-secret")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lockstep", "power-exporter", "--config", str(config),
        "--web.listen-address", "127.0.0.1:0", "--log.level", "debug", env=env, stderr=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(proc.stderr.readline(), 60)
        while b"listening" not in line:
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
        address = re.search(rb"address=(\S+)", line).group(1).decode()
        values: dict = {}
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 30
            while len([k for k in values if k[0] == "lockstep_redfish_up"]) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                values = parse(await (await session.get(f"{address}/metrics")).text())
        assert value(values, "lockstep_redfish_up", target="node00") == 1
        assert value(values, "lockstep_redfish_up", target="dead") == 0
        assert value(values, "lockstep_chassis_power_watts", target="node00") == 374
        assert b"hunter2" not in open(f"/proc/{proc.pid}/cmdline", "rb").read()
    finally:
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert b"hunter2" not in err and b"target poll failed" in err and b"target=dead" in err


async def test_web_config_basic_auth_guards_metrics_and_probe(aiohttp_client, tmp_path):
    import bcrypt

    from lockstep.exporters.toolkit.webconfig import WebConfig
    web_config = WebConfig("web.yml", basic_auth_users={"prom": bcrypt.hashpw(b"scrape", bcrypt.gensalt(4))})
    config = load_config(write_config(tmp_path, "", [target("n1", "ipmi", "local")]))
    client = await aiohttp_client(create_app(config, AppOptions(background=False, web_config=web_config)))
    assert (await client.get("/metrics")).status == 401
    assert (await client.get("/probe", params={"target": "n1"})).status == 401
    ok = await client.get("/metrics", headers={"Authorization": basic_auth("prom", "scrape")})
    assert ok.status == 200 and "lockstep_power_target_info" in await ok.text()
