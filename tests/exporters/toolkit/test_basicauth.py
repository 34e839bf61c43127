"""Basic auth of every lockstep service (``lockstep.exporters.toolkit.basicauth`` through
``lockstep.exporters.toolkit.web``) against hostile callers, on a real local aiohttp server: a flood of
wrong passwords, unknown users, and passwords past bcrypt's 72 bytes."""
from __future__ import annotations

import asyncio
from base64 import b64encode

import bcrypt
import pytest
from aiohttp import web

from lockstep.exporters.toolkit import basicauth
from lockstep.exporters.toolkit.web import auth_middleware
from lockstep.exporters.toolkit.webconfig import WebConfig

# Slow enough (~0.5 s a check here) that a scrape answered within one check is told apart from one
# queued behind the flood, whatever the machine's load.
SLOW_COST = 13


def header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def checks(monkeypatch) -> list[bytes]:
    """The hash of every bcrypt check the service runs, in order."""
    seen: list[bytes] = []
    real = bcrypt.checkpw

    def checkpw(password: bytes, hashed: bytes) -> bool:
        seen.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(basicauth.bcrypt, "checkpw", checkpw)
    return seen


async def client_for(aiohttp_client, cost: int):
    config = WebConfig("web.yml", basic_auth_users={"prom": bcrypt.hashpw(b"secret", bcrypt.gensalt(cost))})

    async def metrics(request: web.Request) -> web.Response:
        # Rendered in a thread, as the node agent's /metrics is: the default executor must be free.
        return web.Response(text=await asyncio.to_thread(lambda: "ok\n"))

    app = web.Application(middlewares=[auth_middleware(config)])
    app.router.add_get("/metrics", metrics)
    return await aiohttp_client(app)


@pytest.mark.slow
async def test_a_flood_of_wrong_passwords_does_not_delay_a_good_scrape(aiohttp_client, checks):
    """Before: every bad password took a slot of the shared default executor, so a verified scrape's
    render queued behind them (619 ms instead of 1.2 ms for 24 bad requests)."""
    client = await client_for(aiohttp_client, SLOW_COST)
    assert (await client.get("/metrics", headers=header("prom", "secret"))).status == 200  # now verified
    answered: list[int] = []

    async def bad(i: int) -> None:
        response = await client.get("/metrics", headers=header("prom", f"guess{i}"))
        answered.append(response.status)

    flood = [asyncio.create_task(bad(i)) for i in range(24)]
    while len(checks) < 2:  # a bad password is being checked
        await asyncio.sleep(0.005)
    good = await client.get("/metrics", headers=header("prom", "secret"))
    denied_before_good = answered.count(401)
    await asyncio.gather(*flood)
    assert good.status == 200
    assert denied_before_good == 0  # the good scrape did not wait for a single bad check
    assert answered.count(503) >= 24 - basicauth.MAX_PENDING  # the rest were turned away, not queued
    assert set(answered) == {401, 503}


async def test_unknown_and_known_users_cost_the_same_check(aiohttp_client, checks):
    """Before: an unknown user was refused without a bcrypt check (0.9 ms against 62 ms), which told
    an attacker which user names exist."""
    client = await client_for(aiohttp_client, 4)
    assert (await client.get("/metrics", headers=header("prom", "wrong"))).status == 401
    assert (await client.get("/metrics", headers=header("nobody", "secret"))).status == 401
    assert len(checks) == 2
    assert checks[0][:7] == checks[1][:7] == b"$2b$04$"  # the same cost
    assert checks[0] != checks[1]  # the unknown user's is the dummy hash, not a real user's


async def test_a_password_past_72_bytes_is_refused_cleanly(aiohttp_client, checks):
    """Before: bcrypt >= 5 raises on it, and the service answered 500 with a traceback."""
    client = await client_for(aiohttp_client, 4)
    for user in ("prom", "nobody"):
        response = await client.get("/metrics", headers=header(user, "x" * 73))
        assert response.status == 401 and "Traceback" not in await response.text()
    assert (await client.get("/metrics", headers=header("prom", "secret"))).status == 200

