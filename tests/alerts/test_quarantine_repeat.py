"""Repeat offenders and the return of drained nodes, through the quarantine receiver's app driving the
fake ``scontrol`` (tests/alerts/conftest.py): a node drained more than once in 7 days is held for a
human even when every alert of its drain resolved, and ``GET /metrics`` flags it."""
from __future__ import annotations

from pathlib import Path

import pytest

from lockstep.alerts.quarantine import REPEAT_WINDOW_S, Fault, Policy
from lockstep.alerts.quarantine_app import QuarantineConfig, create_app
from tests.helpers.quarantine import TOKEN, notification, post, xid

DRAIN, RESUME = "State=DRAIN", "State=RESUME"


def alert(fingerprint: str, status: str, **labels: str) -> dict:
    """One alert of a notification with its own fingerprint (Alertmanager's identity of an alert)."""
    payload = notification(dict(labels), status=status)
    payload["alerts"][0]["fingerprint"] = fingerprint
    return payload


def ecc(node: str, status: str, fingerprint: str = "ecc1", gpu: str = "1") -> dict:
    return alert(fingerprint, status, alertname="GPUUncorrectableECC", node=node, gpu=gpu)


def app(tmp_path: Path, returns: bool = True, state: bool = True):
    return create_app(QuarantineConfig(token=TOKEN, dry_run=False, max_drains_per_hour=10,
                                       state_file=tmp_path / "state.json" if state else None,
                                       return_when_resolved=returns))


def states(calls: list[list[str]]) -> list[tuple[str, str]]:
    return [(argv[1].removeprefix("NodeName="), argv[2]) for argv in calls]


async def metrics(client) -> str:
    resp = await client.get("/metrics")
    assert resp.status == 200
    return await resp.text()


@pytest.mark.integration
async def test_a_node_drained_twice_in_a_week_is_held_not_returned(aiohttp_client, scontrol, tmp_path) -> None:
    client = await aiohttp_client(app(tmp_path))
    assert (await post(client, ecc("node01", "firing")))[1]["actions"][0]["action"] == "drain"
    _, body = await post(client, ecc("node01", "resolved"))
    assert body["actions"] == [{"action": "returned", "node": "node01", "drains_7d": 1}]
    # The same fault comes back days later: drained again, its reason telling whoever reads sinfo -R.
    _, body = await post(client, ecc("node01", "firing", fingerprint="ecc2"))
    assert body["actions"][0]["action"] == "drain"
    assert body["actions"][0]["reason"] == "lockstep GPUUncorrectableECC gpu=1 repeat-offender clear-by-hand"
    _, body = await post(client, ecc("node01", "resolved", fingerprint="ecc2"))
    assert body["actions"] == [{"action": "held", "node": "node01", "drains_7d": 2}]
    assert states(scontrol()) == [("node01", DRAIN), ("node01", RESUME), ("node01", DRAIN)]
    text = await metrics(client)
    assert 'lockstep_fleet_repeat_offender{node="node01"} 1' in text
    assert 'lockstep_fleet_node_drains{node="node01",window="7d"} 2' in text
    assert 'lockstep_fleet_node_drains{node="node01",window="30d"} 2' in text
    assert 'lockstep_fleet_node_drained{node="node01"} 1' in text   # held: still drained


@pytest.mark.integration
async def test_the_hold_survives_a_restart(aiohttp_client, scontrol, tmp_path) -> None:
    first = await aiohttp_client(app(tmp_path))
    await post(first, ecc("node02", "firing"))
    await post(first, ecc("node02", "resolved"))
    await post(first, ecc("node02", "firing", fingerprint="ecc2"))
    await first.close()
    second = await aiohttp_client(app(tmp_path))
    _, body = await post(second, ecc("node02", "resolved", fingerprint="ecc2"))
    assert body["actions"] == [{"action": "held", "node": "node02", "drains_7d": 2}]
    assert states(scontrol())[-1] == ("node02", DRAIN)


@pytest.mark.integration
async def test_a_node_returns_only_when_every_alert_of_its_drain_resolved(aiohttp_client, scontrol, tmp_path) -> None:
    client = await aiohttp_client(app(tmp_path))
    await post(client, ecc("node03", "firing", "a", gpu="1"))
    link = alert("ib", "firing", alertname="InfiniBandLinkDown", node="node03", device="mlx5_0", port="1")
    assert (await post(client, link))[1]["actions"][0]["action"] == "already"
    assert (await post(client, ecc("node03", "resolved", "a", gpu="1")))[1]["actions"] == []
    _, body = await post(client, alert("ib", "resolved", alertname="InfiniBandLinkDown", node="node03",
                                       device="mlx5_0", port="1"))
    assert [a["action"] for a in body["actions"]] == ["returned"]
    assert states(scontrol()) == [("node03", DRAIN), ("node03", RESUME)]
    assert 'lockstep_fleet_node_drained{node="node03"} 0' in await metrics(client)   # returned


@pytest.mark.integration
async def test_an_xid_drain_is_never_returned_by_the_receiver(aiohttp_client, scontrol, tmp_path) -> None:
    """An XID alert resolves when its window passes, repaired or not."""
    client = await aiohttp_client(app(tmp_path))
    fired = notification(xid("node04", "3", "79", action="reboot_node"))
    resolved = notification(xid("node04", "3", "79", action="reboot_node"), status="resolved")
    await post(client, fired)
    assert (await post(client, resolved))[1]["actions"] == []
    assert states(scontrol()) == [("node04", DRAIN)]


@pytest.mark.integration
async def test_without_return_when_resolved_nothing_is_returned(aiohttp_client, scontrol, tmp_path) -> None:
    client = await aiohttp_client(app(tmp_path, returns=False))
    await post(client, ecc("node05", "firing"))
    assert (await post(client, ecc("node05", "resolved")))[1]["actions"] == []
    assert states(scontrol()) == [("node05", DRAIN)]
    assert 'lockstep_fleet_repeat_offender{node="node05"} 0' in await metrics(client)


@pytest.mark.integration
async def test_a_failed_return_is_502_and_retried_with_the_resend(aiohttp_client, scontrol, tmp_path,
                                                                   monkeypatch) -> None:
    client = await aiohttp_client(app(tmp_path))
    await post(client, ecc("node06", "firing"))
    monkeypatch.setenv("FAKE_SCONTROL_RC", "1")
    status, body = await post(client, ecc("node06", "resolved"))
    assert status == 502 and body["actions"][0]["action"] == "failed"
    monkeypatch.setenv("FAKE_SCONTROL_RC", "0")
    status, body = await post(client, ecc("node06", "resolved"))     # Alertmanager retries the notification
    assert status == 200 and body["actions"][0]["action"] == "returned"


def test_two_drains_more_than_seven_days_apart_are_no_repeat_offence() -> None:
    policy, start = Policy(10), 1_000_000.0
    policy.record("node07", start)
    policy.record("node07", start + REPEAT_WINDOW_S + 1)
    assert not policy.repeat_offender("node07", start + REPEAT_WINDOW_S + 1)
    policy.record("node07", start + REPEAT_WINDOW_S + 2)
    assert policy.repeat_offender("node07", start + REPEAT_WINDOW_S + 2)
    assert policy.drains_within("node07", start + REPEAT_WINDOW_S + 2, 30 * 86400.0) == 3


def test_a_resolved_alert_returns_only_nodes_this_receiver_drained() -> None:
    policy = Policy(10)
    assert policy.note_faults([Fault("node08", "x", True, True), Fault("node08", "x", False, True)]) == []
