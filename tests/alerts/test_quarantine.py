"""The quarantine receiver: notification parsing, and the aiohttp app driving a fake ``scontrol`` on
PATH (a script recording its argv: scontrol's protocol is its command line)."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from lockstep import cli
from lockstep.alerts.quarantine import FORGET_AFTER_S, BadPayload, DrainRequest, Policy, parse_notification
from lockstep.alerts.quarantine_app import QuarantineConfig, create_app
from lockstep.alerts.quarantine_cli import TOKEN_ENV
from tests.helpers.quarantine import AUTH, TOKEN, notification, post, xid


def test_parse_picks_firing_hardware_faults_one_per_node() -> None:
    body = json.dumps(notification(
        xid("node01", "3", "79"), xid("node01", "4", "79"),             # two GPUs, one node: one drain
        xid("node02", "0", "13"),                                       # application XID: no drain
        {"alertname": "GPUUncorrectableECC", "node": "node03", "gpu": "1"},
        {"alertname": "InfiniBandLinkDown", "node": "node04", "device": "mlx5_2", "port": "1"},
        {"alertname": "GPURowRemapFailure", "node": "node05", "gpu": "7", "status": "resolved"},
        {"alertname": "TrainingJobStraggler", "node": "node06", "job_id": "1"},
        {"alertname": "ValidationFailed", "node": "node07", "kind": "dcgm-diag", "test": "diag-r3", "scale": "1",
         "check": "memory", "subject": "gpu3", "status": "fail"},
        {"alertname": "ValidationFailed", "node": "node08", "kind": "nccl", "test": "all_reduce_perf", "scale": "2",
         "status": "timeout"},
        {"alertname": "ValidationRegression", "node": "node09", "kind": "nccl", "test": "all_reduce_perf"})).encode()
    assert parse_notification(body) == [
        DrainRequest("node01", "GPUXidCritical", "lockstep GPUXidCritical gpu=3 xid=79"),
        DrainRequest("node03", "GPUUncorrectableECC", "lockstep GPUUncorrectableECC gpu=1"),
        DrainRequest("node04", "InfiniBandLinkDown", "lockstep InfiniBandLinkDown device=mlx5_2 port=1"),
        # the failing test as the reason; a regression is a ticket, never a drain
        DrainRequest("node07", "ValidationFailed", "lockstep ValidationFailed dcgm-diag diag-r3 memory gpu3 fail"),
        DrainRequest("node08", "ValidationFailed", "lockstep ValidationFailed nccl all_reduce_perf timeout")]


def test_xids_drain_by_the_catalogs_recovery_action() -> None:
    """The XID alerts as the rules send them (labels from the XID catalog): 79 (reboot_node), 48 and 95
    (reset_gpu) drain; 94 (restart_app: only the application restarts) does not; 13, 31 and 43 (the
    application's own faults) never drain, even if such an alert arrived. Without an ``action`` label
    the catalog is asked for the code's."""
    def alert(name: str, node: str, code: str, action: str | None) -> dict:
        return {"alertname": name, "node": node, "gpu": "0", "xid": code, **({"action": action} if action else {})}

    body = json.dumps(notification(
        alert("GPUXidCritical", "node01", "79", "reboot_node"), alert("GPUXidCritical", "node02", "48", "reset_gpu"),
        alert("GPUXidCritical", "node03", "95", None), alert("GPUXidWarning", "node04", "94", "restart_app"),
        alert("GPUXidCritical", "node05", "13", None), alert("GPUXidCritical", "node06", "31", "restart_app"),
        alert("GPUXidWarning", "node07", "43", "none"))).encode()
    assert [(r.node, r.reason) for r in parse_notification(body)] == [
        ("node01", "lockstep GPUXidCritical gpu=0 xid=79 action=reboot_node"),
        ("node02", "lockstep GPUXidCritical gpu=0 xid=48 action=reset_gpu"),
        ("node03", "lockstep GPUXidCritical gpu=0 xid=95")]


def test_missing_gpu_and_pending_row_remap_drain() -> None:
    body = json.dumps(notification({"alertname": "GPUMissing", "node": "node08"},
                                   {"alertname": "GPURowRemapPending", "node": "node09", "gpu": "2"})).encode()
    assert [r.node for r in parse_notification(body)] == ["node08", "node09"]


@pytest.mark.parametrize("body, message", [
    (b"{not json", "not JSON"),
    (b'{"alerts": 3}', 'missing "alerts" list'),
    (b'{"alerts": [{"status": "firing", "labels": {"gpu": 3}}]}', "alerts[0]: labels must be a mapping of strings"),
    (json.dumps(notification({"alertname": "GPUFellOffBus", "gpu": "1"})).encode(), "has no node label"),
])
def test_parse_rejects_malformed_notifications(body: bytes, message: str) -> None:
    with pytest.raises(BadPayload, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_notification(body)


@pytest.mark.parametrize("node", ["node[00-99]", "node01,node02", "ALL", "node01 State=RESUME", "-h", ""])
def test_parse_refuses_a_node_label_that_is_not_one_slurm_node_name(node: str) -> None:
    """scontrol reads NodeName as a hostlist: a forged alert (Alertmanager's API takes any labels) with
    node="node[00-99]" would drain the whole cluster as one drain of the hourly budget."""
    body = json.dumps(notification({"alertname": "GPUFellOffBus", "node": node, "gpu": "1"})).encode()
    with pytest.raises(BadPayload, match="node"):
        parse_notification(body)


async def test_hostlist_node_label_is_refused_and_never_reaches_scontrol(aiohttp_client, scontrol) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False)))
    status, body = await post(client, notification(xid("node[01-64]", "3", "79")))
    assert status == 200 and body["actions"] == [] and "node label" in body["refused"][0]["error"]
    assert scontrol() == []


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}])
async def test_wrong_or_missing_token_is_401_and_drains_nothing(aiohttp_client, scontrol, headers) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False)))
    status, body = await post(client, notification(xid("node01", "3", "79")), headers)
    assert (status, body) == (401, {"error": "unauthorized"})
    assert scontrol() == []


async def test_dry_run_logs_and_never_runs_scontrol(aiohttp_client, scontrol, caplog) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN)))
    with caplog.at_level(logging.INFO, "lockstep.quarantine"):
        status, body = await post(client, notification(xid("node01", "3", "79")))
    assert status == 200 and body["dry_run"] is True
    assert [a["action"] for a in body["actions"]] == ["dry_run"]
    assert scontrol() == []
    assert [r.fields["node"] for r in caplog.records if r.fields.get("action") == "dry_run"] == ["node01"]


@pytest.mark.integration
async def test_execute_drains_once_per_node(aiohttp_client, scontrol) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False)))
    payload = notification(xid("node01", "3", "79"))
    assert (await post(client, payload))[1]["actions"][0]["action"] == "drain"
    # Alertmanager re-sends a firing group every repeat_interval: the node is not drained twice.
    assert (await post(client, payload))[1]["actions"][0]["action"] == "already"
    assert scontrol() == [["update", "NodeName=node01", "State=DRAIN", "Reason=lockstep GPUXidCritical gpu=3 xid=79"]]


async def test_dry_run_of_the_documented_xids(aiohttp_client, scontrol) -> None:
    """Dry run (the default): XID 79 and 48 are logged as drains, 94 and 13 not at all; nothing runs."""
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN)))
    status, body = await post(client, notification(
        xid("node01", "3", "79", action="reboot_node"), xid("node02", "1", "48", action="reset_gpu"),
        xid("node03", "2", "94", action="restart_app", alertname="GPUXidWarning"),
        xid("node04", "0", "13", action="restart_app")))
    assert status == 200 and [(a["node"], a["action"]) for a in body["actions"]] == [
        ("node01", "dry_run"), ("node02", "dry_run")]
    assert scontrol() == []


@pytest.mark.integration
async def test_hourly_cap_refuses_further_drains_and_logs_them(aiohttp_client, scontrol, caplog) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False, max_drains_per_hour=2)))
    alerts = [{"alertname": "GPUUncorrectableECC", "node": f"node0{i}", "gpu": "0"} for i in range(4)]
    with caplog.at_level(logging.INFO, "lockstep.quarantine"):
        status, body = await post(client, notification(*alerts))
    assert status == 200
    assert [a["action"] for a in body["actions"]] == ["drain", "drain", "rate_limited", "rate_limited"]
    assert [argv[1] for argv in scontrol()] == ["NodeName=node00", "NodeName=node01"]
    refused = [r for r in caplog.records if r.fields.get("action") == "rate_limited"]
    assert [r.levelno for r in refused] == [logging.ERROR, logging.ERROR]


@pytest.mark.integration
async def test_failed_scontrol_is_502_and_retried_on_the_next_notification(aiohttp_client, scontrol,
                                                                          monkeypatch) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False)))
    payload = notification({"alertname": "InfiniBandLinkDown", "node": "node07", "device": "mlx5_1", "port": "1"})
    monkeypatch.setenv("FAKE_SCONTROL_RC", "1")
    status, body = await post(client, payload)
    assert status == 502 and body["actions"][0]["action"] == "failed"
    monkeypatch.setenv("FAKE_SCONTROL_RC", "0")
    assert (await post(client, payload))[1]["actions"][0]["action"] == "drain"
    assert len(scontrol()) == 2


@pytest.mark.integration
async def test_state_file_keeps_drains_across_restarts(aiohttp_client, scontrol, tmp_path: Path) -> None:
    cfg = QuarantineConfig(token=TOKEN, dry_run=False, max_drains_per_hour=1, state_file=tmp_path / "state.json")
    first = await aiohttp_client(create_app(cfg))
    await post(first, notification(xid("node01", "3", "79")))
    second = await aiohttp_client(create_app(cfg))
    body = (await post(second, notification(xid("node01", "3", "79"), xid("node02", "1", "79"))))[1]
    assert [a["action"] for a in body["actions"]] == ["already", "rate_limited"]
    assert len(scontrol()) == 1


async def test_malformed_body_is_400(aiohttp_client, scontrol) -> None:
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False)))
    resp = await client.post("/alerts", data=b"[]", headers=AUTH)
    assert resp.status == 400 and scontrol() == []


def test_cli_refuses_to_start_without_a_token(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert cli.main(["alerts", "quarantine-receiver"]) == 2
    assert f"${TOKEN_ENV}" in capsys.readouterr().err
    assert cli.main(["alerts", "quarantine-receiver", "--token-file", str(tmp_path / "missing")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_cli_refuses_a_corrupt_state_file(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    state = tmp_path / "state.json"
    state.write_text("{not json")
    assert cli.main(["alerts", "quarantine-receiver", "--state-file", str(state)]) == 2
    assert f"{state}: unreadable quarantine state" in capsys.readouterr().err


def test_cli_has_no_token_flag() -> None:
    with pytest.raises(SystemExit):
        cli.main(["alerts", "quarantine-receiver", "--token", TOKEN])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.integration
async def test_hung_scontrol_is_killed_and_reported_failed(aiohttp_client, scontrol, tmp_path: Path,
                                                          monkeypatch) -> None:
    """slurmctld unreachable: scontrol hangs. Left running it could still drain later, behind the
    receiver's back, and every retried notification would add one more hung process."""
    monkeypatch.setenv("FAKE_SCONTROL_SLEEP", "120")
    # long enough for the fake (a Python script) to start and write its pid on a loaded machine
    client = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False, timeout_s=5.0)))
    status, body = await post(client, notification(xid("node01", "3", "79")))
    assert status == 502 and body["actions"][0]["action"] == "failed"
    (pid,) = map(int, (tmp_path / "scontrol.pids").read_text().split())
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the timed-out scontrol is still running"


@pytest.mark.integration
async def test_dry_run_does_not_poison_the_state_file_of_a_later_live_run(aiohttp_client, scontrol,
                                                                         tmp_path: Path) -> None:
    """Trying the receiver in dry run first must not make the live run believe those nodes are drained."""
    state = tmp_path / "state.json"
    dry = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, state_file=state)))
    assert (await post(dry, notification(xid("node01", "3", "79"))))[1]["actions"][0]["action"] == "dry_run"
    live = await aiohttp_client(create_app(QuarantineConfig(token=TOKEN, dry_run=False, state_file=state)))
    assert (await post(live, notification(xid("node01", "3", "79"))))[1]["actions"][0]["action"] == "drain"
    assert scontrol() == [["update", "NodeName=node01", "State=DRAIN", "Reason=lockstep GPUXidCritical gpu=3 xid=79"]]


def test_a_repaired_node_is_drained_again_on_a_new_fault_a_day_later_within_the_cap() -> None:
    """The drained-node memory only absorbs Alertmanager's re-sends of the same firing group (every
    repeat_interval, 4h by default). A node a human repaired and resumed must be drained again when it
    faults again, and that drain spends the hourly budget like any other."""
    policy = Policy(max_per_hour=2)
    t0 = 1_000_000.0
    assert policy.decide("node01", t0) == "drain"
    policy.record("node01", t0)
    assert policy.decide("node01", t0 + 4 * 3600) == "already"      # Alertmanager repeat
    later = t0 + FORGET_AFTER_S + 1
    assert policy.decide("node02", later) == "drain"
    policy.record("node02", later)
    assert policy.decide("node01", later) == "drain"                  # new fault after repair
    policy.record("node01", later)
    assert policy.decide("node03", later + 60) == "rate_limited"      # node02 and node01 spent this hour's budget


def test_the_hourly_cap_holds_for_nodes_drained_long_ago() -> None:
    """Ten nodes drained yesterday (as a restarted receiver loads them) fault again together: only
    max_per_hour of them are drained this hour, the rest are refused until the hour has passed."""
    t0 = 1_000_000.0
    policy = Policy(max_per_hour=2)
    for i in range(10):
        policy.record(f"node{i:02d}", t0 - FORGET_AFTER_S - 60, persist=False)
    decisions = []
    for i in range(10):
        decisions.append(policy.decide(f"node{i:02d}", t0 + i))
        if decisions[-1] == "drain":
            policy.record(f"node{i:02d}", t0 + i, persist=False)
    assert decisions == ["drain"] * 2 + ["rate_limited"] * 8
    assert policy.decide("node05", t0 + 3601) == "drain"
