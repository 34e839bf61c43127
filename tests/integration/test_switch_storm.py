"""End to end, all real but the switches: the simulator and its node agents (job 7001 on node00 and node01,
node01's NIC on rail 1 storming from 70 s to 82 s), fake SONiC switches serving the same storm over real gNMI
(simulator/gnmistorm.py: it enters the fabric at rail 1's leaf port facing node01, spreads to the leaf's
other ports and to the spine, and the leaf's PFC watchdog steps in), the switch exporter subscribing to them,
Prometheus with the generated rules and Alertmanager. The storm page names the originating switch port, the
host and job behind it and the jobs behind its switch; the spine port, paused only by the leaf, is never named."""
from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.alerts import config
from lockstep.exporters.catalog.selectors import SWITCH_JOB
from lockstep.simulator import gnmistorm
from lockstep.simulator.gnmi import FakeSwitch
from lockstep.stack import reload_prometheus, start_on_port
from tests.helpers.alerting import ALERTS, Webhook, start_alerting, until

SCENARIO = ALERTS / "e2e-pause-storm.yaml"
# The scenario's storm (70-82 s) waits for a straggler test_pause_storm.py needs flagged first; the page from the
# switches needs only the stack up, so here the storm starts at STORM_START_S (still 40 s for the stack to start).
STORM_START_S = 40
JOB = "7001"


def storm_scenario(path: Path) -> tuple[Path, dict]:
    """The end-to-end scenario with its pause storm moved to STORM_START_S, as long as before."""
    doc = yaml.safe_load(SCENARIO.read_text())
    storm = next(f for f in doc["faults"] if f["kind"] == "pause_storm")
    storm["end_s"], storm["start_s"] = STORM_START_S + storm["end_s"] - storm["start_s"], STORM_START_S
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, storm

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.long(50)]


def fabric(cluster: dict) -> tuple[tuple[gnmistorm.Switch, ...], dict[str, dict]]:
    """One leaf per rail (node i on port Ethernet<4i>, the spine on Ethernet64) and one spine (leaf r on
    Ethernet<4r>), with the switch exporter's neighbors map of each."""
    nodes, rails = cluster["nodes"], len(cluster["nodes"][0]["gpus"])
    switches, neighbors = [], {}
    for rail in range(rails):
        leaf = f"leaf-r{rail}"
        hosts = {f"Ethernet{4 * i}": {"node": n["name"], "interface": n["gpus"][rail]["interface"]}
                 for i, n in enumerate(nodes)}
        neighbors[leaf] = {**hosts, "Ethernet64": {"switch": "spine1", "port": f"Ethernet{4 * rail}"}}
        switches.append(gnmistorm.Switch(leaf, (*hosts, "Ethernet64"), (("Ethernet64", "spine1", f"Ethernet{4 * rail}"),)))
    neighbors["spine1"] = {f"Ethernet{4 * r}": {"switch": f"leaf-r{r}", "port": "Ethernet64"} for r in range(rails)}
    switches.append(gnmistorm.Switch("spine1", tuple(neighbors["spine1"])))
    return tuple(switches), neighbors


async def test_the_storm_page_names_the_originating_switch_port_and_the_jobs_behind_it(
        aiohttp_server, stack, tmp_path: Path) -> None:
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    root = tmp_path / "sim"
    scenario, fault = storm_scenario(tmp_path / SCENARIO.name)
    sim = await asyncio.to_thread(lc.start_sim, scenario, root, stack)
    cluster = json.loads((root / "cluster.json").read_text())
    at = lambda s: cluster["start_timestamp"] + s / cluster["speed"]  # noqa: E731 (sim seconds to Unix time)
    origin_node = next(i for i, n in enumerate(cluster["nodes"]) if n["name"] == fault["node"])
    origin = (f"leaf-r{fault['nic']}", f"Ethernet{4 * origin_node}")
    storm = gnmistorm.Storm(*origin, fault["priority"], at(fault["start_s"]), at(fault["end_s"]))
    switches, neighbors = fabric(cluster)
    fakes = {}
    for s in switches:
        fakes[s.name] = FakeSwitch(lambda now, name=s.name: gnmistorm.recording(storm, switches, name, now)).start()
    try:
        await _run(hook, server, root, cluster, sim, stack, tmp_path, fakes, neighbors, origin, storm)
    finally:
        for fake in fakes.values():
            fake.stop()


async def _run(hook, server, root, cluster, sim, stack, tmp_path, fakes, neighbors, origin, storm) -> None:
    agents = await asyncio.to_thread(lc.start_node_agents, root, stack)
    targets = [{"name": name, "address": fake.address, "path_set": "sonic", "neighbors": neighbors[name]}
               for name, fake in fakes.items()]
    (tmp_path / "switches.yaml").write_text(yaml.safe_dump({"sample_interval_s": 0.5, "targets": targets}))
    exporter = stack.add(await asyncio.to_thread(start_on_port, "switch-exporter", lambda port: [
        sys.executable, "-m", "lockstep", "switch-exporter", f"--config={tmp_path / 'switches.yaml'}",
        f"--web.listen-address=127.0.0.1:{port}"], tmp_path, ready_path="/metrics"))

    base = f"http://127.0.0.1:{server.port}"
    cfg = config.load(ALERTS / "e2e-config.yaml")
    cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue"))
    prom, am = await _alerting(cfg, agents, exporter, stack, tmp_path)
    services = (sim, prom, am, exporter, *agents.values())

    def origin_page():
        return [a for _, a in hook.alerts("PFCPauseStorm", "firing") if a["labels"].get("signal") == "switch_origin"]
    pages = await until(origin_page, storm.end + 30, "the PFCPauseStorm page from the switches", services)
    node = cluster["nodes"][int(origin[1].removeprefix("Ethernet")) // 4]
    for page in pages:  # the origin only: never the spine's port the leaf pauses, never the leaf's victims
        labels = page["labels"]
        assert (labels["switch"], labels["port"], labels["priority"]) == (*origin, str(storm.priority)), labels
        assert (labels["node"], labels["interface"], labels["job_id"]) == (
            node["name"], node["gpus"][int(origin[0].removeprefix("leaf-r"))]["interface"], JOB)
        assert labels["severity"] == "page"
        description = page["annotations"]["description"]
        assert f"Jobs behind {origin[0]}: {JOB}" in description, description
        assert "PFC watchdog" in description, description


async def _alerting(cfg, agents, exporter, stack, workdir: Path):
    """Prometheus as tests.helpers.alerting starts it, scraping the switch exporter too."""
    prom, am = await start_alerting(cfg, agents, stack, workdir)
    prom_config = yaml.safe_load((workdir / "prom" / "prometheus.yml").read_text())
    prom_config["scrape_configs"].append(lc.scrape_job(SWITCH_JOB, lc.host_port(exporter)))
    await asyncio.to_thread(reload_prometheus, prom, prom_config)
    return prom, am
