"""End to end, all real: validation results written by the store from real captures, three node agents
serving them, Prometheus with the generated rules, Alertmanager with the generated config and the
quarantine receiver (dry run). node02's last all-reduce is 30 % below its own history: ValidationRegression
reaches the ticket queue. node03's DCGM diagnostic fails memory on gpu3: ValidationFailed pages and the
quarantine receiver drains node03 with the failing test as the reason."""
from __future__ import annotations

import asyncio
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lockstep.alerts import config
from lockstep.stack import start_on_port
from tests.helpers import validation_results
from tests.helpers.alerting import ALERTS, Webhook, start_alerting, until

pytestmark = pytest.mark.integration
NODES = ("node01", "node02", "node03")


def start_agent(stack, results: Path, node: str, workdir: Path):
    return stack.add(start_on_port(f"agent-{node}", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults", "--collector.validation", f"--validation.results-dir={results}",
        f"--node.name={node}"], workdir / node, None, "/metrics"))


async def test_regression_tickets_and_failed_diagnostic_pages_and_drains(aiohttp_server, stack, tmp_path: Path):
    results = tmp_path / "validation"
    validation_results.fill(results, NODES, degraded="node02", failing="node03")
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    quarantine = stack.add(await asyncio.to_thread(start_on_port, "quarantine", lambda port: [
        sys.executable, "-m", "lockstep", "alerts", "quarantine-receiver", f"--web.listen-address=127.0.0.1:{port}",
        f"--token-file={token}"], tmp_path / "q", None, "/-/healthy"))
    agents = {node: await asyncio.to_thread(start_agent, stack, results, node, tmp_path) for node in NODES}

    base = f"http://127.0.0.1:{server.port}"
    cfg = config.load(ALERTS / "e2e-config.yaml")
    cfg = replace(cfg, for_={**cfg.for_, "ValidationRegression": "1s"}, routing=replace(
        cfg.routing, pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue",
        quarantine_webhook_url=f"{quarantine.url}/alerts", quarantine_bearer_token_file=str(token)))
    prom, am = await start_alerting(cfg, agents, stack, tmp_path)
    services = (prom, am, quarantine, *agents.values())
    deadline = time.time() + 90

    ticket = (await until(lambda: hook.alerts("ValidationRegression", "firing"), deadline,
                           "ValidationRegression in the queue", services))[0][1]
    assert (ticket["labels"]["node"], ticket["labels"]["test"], ticket["labels"]["figure"],
            ticket["labels"]["baseline"], ticket["labels"]["severity"]) == (
        "node02", "all_reduce_perf", "avg_busbw", "history", "ticket")
    assert "at 70% of its history baseline" in ticket["annotations"]["summary"]

    page = (await until(lambda: hook.alerts("ValidationFailed", "firing"), deadline,
                         "ValidationFailed on the pager", services))[0][1]
    assert {k: page["labels"][k] for k in ("node", "kind", "test", "check", "subject", "severity")} == {
        "node": "node03", "kind": "dcgm-diag", "test": "diag-r3", "check": "memory", "subject": "gpu3",
        "severity": "page"}
    reason = "lockstep ValidationFailed dcgm-diag diag-r3 memory gpu3 fail"

    def drained() -> list[str]:
        return re.findall(r"action=dry_run node=(\S+) alertname=ValidationFailed reason=\"([^\"]+)\"",
                          quarantine.log_tail(200))
    assert await until(drained, deadline, "the quarantine receiver's dry-run drain", services) == [("node03", reason)]
    assert {a["labels"]["node"] for _, _, a in hook.received} == {"node02", "node03"}
