"""The power exporter against the simulator's Redfish service, with the config `lockstep sim run`
writes (DIR/power-exporter.yaml): every device, each under its own path prefix, polls up."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import yaml

from lockstep.exporters.power.app import POLLER, AppOptions, create_app
from lockstep.exporters.power.config import load_config
from tests.helpers.paths import REPO
from tests.helpers.power import parse, value

pytestmark = pytest.mark.integration

SCENARIO = REPO / "simulator/scenarios/checkpoint.yaml"


async def test_power_exporter_polls_the_simulated_cluster(tmp_path, aiohttp_client):
    proc = subprocess.Popen([sys.executable, "-m", "lockstep", "sim", "run", str(SCENARIO), "--root", str(tmp_path),
                             "--speed", "5", "--duration", "0", "--redfish-listen", "127.0.0.1:0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        path = tmp_path / "power-exporter.yaml"
        for _ in range(600):
            if path.exists() or proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        assert path.exists(), proc.stderr.read().decode() if proc.poll() is not None else "no config written"
        written = yaml.safe_load(path.read_text())
        client = await aiohttp_client(create_app(load_config(path), AppOptions(background=False)))
        await client.app[POLLER].poll_all()
        values = parse(await (await client.get("/metrics")).text())
    finally:
        proc.terminate()
        proc.wait(30)
    kinds = {t["name"]: t["kind"] for t in written["targets"]}
    assert sorted(kinds.values()) == ["bmc"] * 4 + ["cdu"] + ["pdu"] * 2
    for name, kind in kinds.items():
        assert value(values, "lockstep_redfish_up", target=name) == 1, name
        if kind == "bmc":
            assert value(values, "lockstep_chassis_power_watts", target=name) > 0
            psus = [k for k in values if k[0] == "lockstep_psu_input_power_watts" and ("target", name) in k[1]]
            assert len(psus) == 6
    for t in written["targets"]:
        if t["kind"] == "pdu":
            assert value(values, "lockstep_pdu_power_watts", pdu=t["name"], rack=t["rack"]) > 0
            assert value(values, "lockstep_rack_power_budget_watts", rack=t["rack"]) == t["budget_watts"]
    cdu = next(name for name, kind in kinds.items() if kind == "cdu")
    loops = {dict(k[1])["loop"] for k in values if k[0] == "lockstep_coolant_temperature_celsius"}
    assert {"supply", "return", "facility_supply", "facility_return"} <= loops
    assert value(values, "lockstep_coolant_temperature_celsius", target=cdu, loop="return") > \
        value(values, "lockstep_coolant_temperature_celsius", target=cdu, loop="supply")
