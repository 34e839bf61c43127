"""End to end, all real: node agents on simulated GPU state, Prometheus with the generated rules,
Alertmanager with the generated config. Three nodes, one fault each, each seen as the GPU's verdict
in Prometheus and as the right alert at the right receiver (issue 15, "Done when"):

- node01 shows 2 of its 3 GPUs        → lockstep_node_gpus_visible 2 < expected 3 → GPUMissing (page)
- node02's GPU 1 counts 2 uncorrectable ECC errors → check ecc_uncorrectable 2, unhealthy
                                                     → GPUUncorrectableECC (ticket)
- node03's GPU 0 has a row remap pending → check row_remap 1, still healthy → GPURowRemapPending (ticket)

All three also go to the quarantine receiver's route, whose parser decides to drain each node.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from alerts import alertmanager, build, config
from alerts.quarantine import parse_notification
from lockstep import localcluster as lc
from lockstep.stack import http_get, start_alertmanager, start_prometheus
from test_alerts_e2e import FIXTURES, Webhook, _until
from test_gpu_healthcheck import healthy_node, start_exporter

pytestmark = pytest.mark.integration
# Rules as in the pause-storm e2e (1 s evaluation, short group waits), GPUMissing without its 2 m hold.
E2E_CONFIG = FIXTURES / "e2e-config.yaml"


def write(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def query(url: str, expr: str) -> dict[tuple[str, ...], float]:
    status, body = http_get(f"{url}/api/v1/query?query={expr}")
    assert status == 200, body[:200]
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}


def value(url: str, expr: str) -> float | None:
    result = query(url, expr)
    return next(iter(result.values())) if len(result) == 1 else None


async def test_missing_gpu_uncorrectable_ecc_and_pending_remap_end_to_end(aiohttp_server, stack, tmp_path: Path):
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    base = f"http://127.0.0.1:{server.port}"
    docs = {node: healthy_node() for node in ("node01", "node02", "node03")}
    docs["node01"]["gpus"] = docs["node01"]["gpus"][:2]                  # GPU 2 did not come up
    docs["node03"]["gpus"][0]["remapped_rows"]["pending"] = True         # XID 63: a row awaits a GPU reset
    roots = {node: tmp_path / "sim" / node for node in docs}
    for node, doc in docs.items():
        roots[node].mkdir(parents=True)
        write(roots[node] / "gpus.json", doc)
    agents = {node: stack.add(await asyncio.to_thread(start_exporter, roots[node], tmp_path / f"agent-{node}",
                                                      "--gpu.expected-count=3"))
              for node in docs}

    cfg = config.load(E2E_CONFIG)
    cfg = replace(cfg, for_={**cfg.for_, "GPUMissing": "1s"}, routing=replace(
        cfg.routing, pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue",
        quarantine_webhook_url=f"{base}/quarantine"))
    am = stack.add(await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), tmp_path / "am"))
    build.write(cfg, tmp_path / "rules")
    prom_config = lc.prometheus_config({node: lc.host_port(a) for node, a in agents.items()},
                                       rule_files=[tmp_path / "rules" / build.RULES_FILE],
                                       alertmanager=lc.host_port(am), scrape_interval="1s")
    prom = stack.add(await asyncio.to_thread(start_prometheus, prom_config, tmp_path / "prom"))
    services = (prom, am, *agents.values())
    deadline = lambda: time.time() + 60   # noqa: E731

    # The verdicts before the ECC error: node02 healthy, node03 warned, node01 two GPUs short.
    await _until(lambda: value(prom.url, 'lockstep_gpu_health{node="node02",gpu="1",check="ecc_uncorrectable"}') == 0,
                 deadline(), "node02's ECC check", services)
    assert value(prom.url, 'lockstep_gpu_health{node="node03",gpu="0",check="row_remap"}') == 1
    assert value(prom.url, 'lockstep_gpu_healthy{node="node03",gpu="0"}') == 1   # a warning: still healthy
    assert (value(prom.url, 'lockstep_node_gpus_visible{node="node01"}'),
            value(prom.url, 'lockstep_node_gpus_expected{node="node01"}')) == (2, 3)

    docs["node02"]["gpus"][1]["ecc"]["uncorrected"] = 2                   # a double-bit error, XID 48
    write(roots["node02"] / "gpus.json", docs["node02"])
    await _until(lambda: value(prom.url, 'lockstep_gpu_healthy{node="node02",gpu="1"}') == 0,
                 deadline(), "node02's GPU 1 to turn unhealthy", services)
    assert value(prom.url, 'lockstep_gpu_health{node="node02",gpu="1",check="ecc_uncorrectable"}') == 2

    expected = {("GPUMissing", "pager", "node01", None), ("GPUUncorrectableECC", "queue", "node02", "1"),
                ("GPURowRemapPending", "queue", "node03", "0")}

    def notified():
        got = {(a["labels"]["alertname"], receiver, a["labels"]["node"], a["labels"].get("gpu"))
               for _, receiver, a in hook.received if a["status"] == "firing" and receiver != "quarantine"}
        return got if expected <= got else None
    got = await _until(notified, deadline(), "the three alerts", services)
    assert {name for name, *_ in got} == {name for name, *_ in expected}, got   # nothing else fired
    missing = next(a for _, r, a in hook.received if a["labels"]["alertname"] == "GPUMissing")
    assert missing["labels"]["severity"] == "page" and missing["annotations"]["description"].startswith(
        "node01 shows 1 GPU(s) fewer")

    # Alertmanager routed the same three to the quarantine receiver, whose decision is to drain each node.
    drained = {r.node for _, receiver, a in hook.received if receiver == "quarantine"
               for r in parse_notification(json.dumps({"alerts": [a]}).encode())}
    assert drained == {"node01", "node02", "node03"}
