"""The quarantine receiver against forged and malformed notifications (anyone who reaches
Alertmanager can post alerts with any labels), on a real local server with a fake ``scontrol``:
names outside the node inventory, case variants, huge and multi-line labels, deep JSON, the circuit
breaker, and a state file that survives a power loss."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from lockstep import cli
from lockstep.alerts import quarantine
from lockstep.alerts.quarantine_app import QuarantineConfig, create_app
from lockstep.alerts.quarantine_cli import TOKEN_ENV
from tests.helpers.quarantine import AUTH, TOKEN, notification, post, xid


def fleet(tmp_path: Path, n: int = 20) -> Path:
    inventory = tmp_path / "nodes"
    inventory.write_text("# sinfo -h -N -o %N | sort -u\n" + "".join(f"node{i:02d}\n" for i in range(n)))
    return inventory


def live(tmp_path: Path, **options) -> QuarantineConfig:
    return QuarantineConfig(**{"token": TOKEN, "dry_run": False, "max_drains_per_hour": 100,
                               "inventory": fleet(tmp_path), **options})


@pytest.mark.integration
async def test_a_name_outside_the_inventory_never_reaches_scontrol_nor_spends_the_cap(
        aiohttp_client, scontrol, tmp_path, caplog):
    """Before: fake names reached scontrol, and used the hourly cap up for real faults."""
    client = await aiohttp_client(create_app(live(tmp_path, max_drains_per_hour=1)))
    with caplog.at_level(logging.WARNING, "lockstep.quarantine"):
        _, body = await post(client, notification(xid("evil01", "0", "79"), xid("gpu-imposter", "0", "79")))
    assert [a["action"] for a in body["actions"]] == ["unknown_node", "unknown_node"]
    assert scontrol() == []
    _, body = await post(client, notification(xid("node03", "0", "79")))
    assert [a["action"] for a in body["actions"]] == ["drain"]
    assert [r.fields["node"] for r in caplog.records if r.fields.get("action") == "unknown_node"] == \
        ["evil01", "gpu-imposter"]


@pytest.mark.integration
async def test_case_variants_are_one_node_drained_as_the_inventory_spells_it(aiohttp_client, scontrol,
                                                                              tmp_path):
    """Before: ``Node06`` and ``node06`` counted as two nodes (two drains of the cap)."""
    client = await aiohttp_client(create_app(live(tmp_path)))
    _, body = await post(client, notification(xid("Node06", "0", "79"), xid("node06", "1", "79")))
    assert [a["action"] for a in body["actions"]] == ["drain"]
    _, body = await post(client, notification(xid("NODE06", "2", "79")))
    assert [a["action"] for a in body["actions"]] == ["already"]
    assert [argv[1] for argv in scontrol()] == ["NodeName=node06"]


@pytest.mark.integration
async def test_huge_and_multiline_labels_make_a_bounded_one_line_reason(aiohttp_client, scontrol,
                                                                         tmp_path):
    """Before: a 128 KiB label made scontrol's argv too long to start (502, retried by Alertmanager
    forever), and a newline passed into Reason=."""
    client = await aiohttp_client(create_app(live(tmp_path)))
    status, body = await post(client, notification(
        {"alertname": "InfiniBandLinkDown", "node": "node01", "device": "x" * (128 << 10), "port": "1"},
        {"alertname": "GPUUncorrectableECC", "node": "node02", "gpu": "3\nState=RESUME\r\x1b[2J"}))
    assert status == 200 and [a["action"] for a in body["actions"]] == ["drain", "drain"]
    (first, second) = scontrol()
    assert len(first[3]) < 200 and first[3].startswith("Reason=lockstep InfiniBandLinkDown device=xxx")
    assert second[3] == "Reason=lockstep GPUUncorrectableECC gpu=3 State=RESUME  [2J"
    assert all(c.isprintable() for argv in (first, second) for c in argv[3])


async def test_deeply_nested_json_is_400_not_500(aiohttp_client, scontrol, tmp_path):
    client = await aiohttp_client(create_app(live(tmp_path)))
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"alerts": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"):
        response = await client.post("/alerts", data=body, headers=AUTH)
        assert response.status == 400, await response.text()
        assert "nested too deeply" in (await response.json())["error"]
    assert scontrol() == []


@pytest.mark.integration
async def test_the_circuit_breaker_stops_draining_past_a_share_of_the_fleet(aiohttp_client, scontrol,
                                                                             tmp_path, caplog):
    """A rule gone wrong (or a forger) firing on many nodes at once: with 20 nodes and a 10 % breaker,
    two stand drained and the third is refused, logged as an error; a smaller share still drains one."""
    client = await aiohttp_client(create_app(live(tmp_path, max_drained_fraction=0.1)))
    alerts = [{"alertname": "GPUUncorrectableECC", "node": f"node{i:02d}", "gpu": "0"} for i in range(5)]
    with caplog.at_level(logging.INFO, "lockstep.quarantine"):
        _, body = await post(client, notification(*alerts))
    assert [a["action"] for a in body["actions"]] == ["drain", "drain"] + ["circuit_open"] * 3
    assert len(scontrol()) == 2
    assert {r.levelno for r in caplog.records if r.fields.get("action") == "circuit_open"} == {logging.ERROR}
    small = await aiohttp_client(create_app(live(tmp_path / "..", max_drained_fraction=0.01)))
    _, body = await post(small, notification(*alerts[3:]))
    assert [a["action"] for a in body["actions"]] == ["drain", "circuit_open"]


@pytest.mark.integration
async def test_an_unreadable_inventory_drains_nothing_and_is_retried(aiohttp_client, scontrol,
                                                                      tmp_path):
    config = live(tmp_path)
    config.inventory.unlink()
    client = await aiohttp_client(create_app(config))
    status, body = await post(client, notification(xid("node01", "0", "79")))
    assert status == 502 and body["actions"][0]["action"] == "failed"
    assert "node inventory" in body["actions"][0]["error"]
    fleet(tmp_path)  # back: read again on the next notification
    assert (await post(client, notification(xid("node01", "0", "79"))))[1]["actions"][0]["action"] == "drain"
    assert len(scontrol()) == 1


@pytest.mark.integration
async def test_the_state_file_is_synced_before_it_replaces_the_old_one(aiohttp_client, scontrol, tmp_path,
                                                                         monkeypatch):
    """Before: written without fsync, a power loss right after a drain could leave an empty state file
    (the rename reaches the disk before the data), and the receiver would then refuse to start."""
    synced: list[str] = []
    real_fsync, real_replace = os.fsync, Path.replace

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(self: Path, target) -> Path:
        synced.append(f"rename {self.name} -> {Path(target).name}")
        return real_replace(self, target)

    monkeypatch.setattr(quarantine.os, "fsync", fsync)
    monkeypatch.setattr(Path, "replace", replace)
    state = tmp_path / "state.json"
    client = await aiohttp_client(create_app(live(tmp_path, state_file=state)))
    await post(client, notification(xid("node01", "0", "79")))
    assert synced == [str(tmp_path / "state.tmp"), "rename state.tmp -> state.json", str(tmp_path)]
    assert "node01" in state.read_text()


def test_cli_refuses_to_execute_without_an_inventory(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert cli.main(["alerts", "quarantine-receiver", "--execute"]) == 2
    assert "--node-inventory" in capsys.readouterr().err
    assert cli.main(["alerts", "quarantine-receiver", "--max-drained-fraction", "0"]) == 2


@pytest.mark.parametrize("labels", [{"alertname": "GPUFellOffBus", "node": "node01", "gpu": "1" * 5000}])
def test_parse_bounds_a_long_label(labels) -> None:
    (request,) = quarantine.parse_notification(__import__("json").dumps(notification(labels)).encode())
    assert len(request.reason) <= 3 * quarantine.REASON_VALUE_CHARS
