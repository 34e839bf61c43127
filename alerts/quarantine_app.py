"""The quarantine receiver's aiohttp app: ``POST /alerts`` takes Alertmanager webhook notifications
(bearer token required) and drains faulty nodes with ``scontrol``; ``GET /-/healthy``.

Every decision is logged (logfmt fields action=drain|dry_run|already|rate_limited|circuit_open|
unknown_node|failed|refused, and with ``return_when_resolved`` returned|dry_run_return|held). A node
drained more than once in 7 days is a repeat offender: its drain reason says so, it is never returned
automatically (``held``), and ``GET /metrics`` shows it (``lockstep_fleet_repeat_offender``). Drains are
counted from the receiver's own state, not from Prometheus: the hold must stand when Prometheus is
down, and only the receiver knows which drains it made. Requests are handled one at a time (a lock) so the hourly cap holds under
concurrent notifications. With a node inventory (``lockstep.alerts.inventory``) a name it does not list is
refused, and the circuit breaker counts its size as the fleet.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from aiohttp import web

from lockstep.alerts.inventory import Inventory, InventoryError
from lockstep.alerts.quarantine import (
    FORGET_AFTER_S,
    HISTORY_S,
    REPEAT_WINDOW_S,
    BadPayload,
    DrainRequest,
    Policy,
    read_notification,
    scontrol_argv,
)
from lockstep.exporters.catalog import fleet as m
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.quarantine")


@dataclass(frozen=True)
class QuarantineConfig:
    token: str
    dry_run: bool = True
    max_drains_per_hour: int = 2
    scontrol: str = "scontrol"
    state_file: Path | None = None
    timeout_s: float = 30.0
    inventory: Path | None = None
    # The circuit breaker: never more than this share of the inventory's nodes drained at once.
    max_drained_fraction: float = 0.1
    # Return a drained node (scontrol State=RESUME) once every alert of its drain has resolved, but for
    # XID drains and repeat offenders. Off: undraining stays a human decision.
    return_when_resolved: bool = False


@dataclass
class _State:
    config: QuarantineConfig
    policy: Policy
    lock: asyncio.Lock
    inventory: Inventory | None = None


STATE = web.AppKey("quarantine", _State)


async def _scontrol(config: QuarantineConfig, request: DrainRequest, state: str = "DRAIN") -> tuple[bool, str]:
    argv = scontrol_argv(config.scontrol, request, state)
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), config.timeout_s)
    except asyncio.TimeoutError:
        # A hung scontrol left running could still drain later, unrecorded; retries would pile up more.
        proc.kill()
        await proc.wait()
        return False, f"scontrol timed out after {config.timeout_s:g}s (killed)"
    return proc.returncode == 0, out.decode(errors="replace").strip()[-500:] or f"exit {proc.returncode}"


def _check_inventory(state: _State, request: DrainRequest) -> tuple[DrainRequest, int | None] | tuple[str, str]:
    """(the request with the inventory's spelling of the node, the fleet size), or (action, why):
    ``unknown_node`` for a name the inventory lacks, ``failed`` (retried) for an unreadable one."""
    if state.inventory is None:
        return request, None
    try:
        node, fleet = state.inventory.lookup(request.node), state.inventory.size()
    except InventoryError as exc:
        return "failed", str(exc)
    return (replace(request, node=node), fleet) if node else ("unknown_node", "not in the node inventory")


async def _handle(state: _State, request: DrainRequest) -> dict:
    config, now = state.config, time.time()
    fields = {"node": request.node, "alertname": request.alertname, "reason": request.reason}
    checked, fleet = _check_inventory(state, request)
    if isinstance(checked, str):
        fields["error"] = fleet
        log.log(logging.ERROR if checked == "failed" else logging.WARNING, "quarantine %s", checked,
                extra=kv(action=checked, **fields))
        return {"action": checked, **fields}
    request, fields["node"] = checked, checked.node
    decision = state.policy.decide(request.node, now, fleet)
    if decision == "drain" and config.dry_run:
        decision = "dry_run"
        # Counted like a drain (the log shows what a live run would do) but never persisted: a later
        # live run on the same state file must not take these nodes for drained.
        state.policy.record(request.node, now, persist=False)
    elif decision == "drain":
        if state.policy.drains_within(request.node, now, REPEAT_WINDOW_S) >= 1:   # this drain makes it one
            request = replace(request, reason=f"{request.reason} repeat-offender clear-by-hand")
            fields["reason"] = request.reason
        ok, output = await _scontrol(config, request)
        if ok:
            state.policy.record(request.node, now)
        else:
            decision, fields["error"] = "failed", output
    level = logging.ERROR if decision in ("failed", "rate_limited", "circuit_open") else logging.INFO
    log.log(level, "quarantine %s", decision, extra=kv(action=decision, **fields))
    return {"action": decision, **fields}


async def _return(state: _State, node: str) -> dict:
    """A node whose drain's alerts have all resolved: returned, or held for a human."""
    config, now, policy = state.config, time.time(), state.policy
    fields = {"node": node, "drains_7d": policy.drains_within(node, now, REPEAT_WINDOW_S)}
    if policy.repeat_offender(node, now):
        log.warning("quarantine held: repeat offender, clear by hand", extra=kv(action="held", **fields))
        return {"action": "held", **fields}
    if config.dry_run:
        decision = "dry_run_return"
        policy.drained.pop(node.casefold(), None)   # as its drain: in memory only
    else:
        ok, output = await _scontrol(config, DrainRequest(node, "", ""), "RESUME")
        decision = "returned" if ok else "failed"
        if ok:
            policy.returned(node)
        else:
            fields["error"] = output
    log.log(logging.ERROR if decision == "failed" else logging.INFO, "quarantine %s", decision,
            extra=kv(action=decision, **fields))
    return {"action": decision, **fields}


def _authorized(request: web.Request, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())


async def alerts_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not _authorized(request, state.config.token):
        log.warning("rejected notification without a valid bearer token", extra=kv(remote=request.remote))
        return web.json_response({"error": "unauthorized"}, status=401,
                                 headers={"WWW-Authenticate": 'Bearer realm="lockstep-quarantine"'})
    try:
        notification = read_notification(await request.read())
    except BadPayload as exc:
        log.warning("bad notification: %s", exc)
        return web.json_response({"error": str(exc)}, status=400)
    refused = [{"alert": r.index, "alertname": r.alertname, "error": r.error} for r in notification.refused]
    for r in notification.refused:
        log.warning("quarantine refused an alert: %s", r.error,
                    extra=kv(action="refused", alert=r.index, alertname=r.alertname, error=r.error))
    async with state.lock:
        actions = [await _handle(state, d) for d in notification.drains]
        candidates = state.policy.note_faults(notification.faults)
        if state.config.return_when_resolved:
            actions += [await _return(state, node) for node in candidates]
        elif candidates:
            state.policy.save()
    # 5xx makes Alertmanager retry the notification: what failed is tried again, the rest is idempotent.
    # A refused alert is not a failure: sent again it would be refused again, so it is answered (and
    # logged) and the notification is 200, which Alertmanager records as delivered. A 4xx would do no
    # better: Alertmanager does not retry it, but neither does it record the notification, so it sends
    # the whole group again at every group_interval, valid alerts and all.
    status = 502 if any(a["action"] == "failed" for a in actions) else 200
    return web.json_response({"dry_run": state.config.dry_run, "actions": actions, "refused": refused},
                             status=status)


async def healthy(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def metrics(request: web.Request) -> web.Response:
    """Each node drained within 30 days: its drains in 7 and 30 days, whether it is a repeat offender, and
    whether it is drained now."""
    policy, now = request.app[STATE].policy, time.time()
    samples = []
    for node in sorted(policy.history):
        month = policy.drains_within(node, now, HISTORY_S)
        if not month:
            continue
        samples += [Sample(m.NODE_DRAINS, (node, "7d"), float(policy.drains_within(node, now, REPEAT_WINDOW_S))),
                    Sample(m.NODE_DRAINS, (node, "30d"), float(month)),
                    Sample(m.REPEAT_OFFENDER, (node,), float(policy.repeat_offender(node, now))),
                    Sample(m.NODE_DRAINED, (node,), float(now - policy.drained.get(node, float("-inf")) < FORGET_AFTER_S))]
    families: dict = {}
    Encoder().add(families, samples)
    return web.Response(text=render_text(families), content_type="text/plain", charset="utf-8")


def create_app(config: QuarantineConfig) -> web.Application:
    if not config.token:
        raise ValueError("the quarantine receiver needs a bearer token")
    app = web.Application(client_max_size=4 << 20)
    policy = Policy(config.max_drains_per_hour, config.state_file, config.max_drained_fraction)
    inventory = Inventory(config.inventory) if config.inventory is not None else None
    app[STATE] = _State(config, policy, asyncio.Lock(), inventory)
    app.router.add_post("/alerts", alerts_handler)
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/metrics", metrics)
    return app
