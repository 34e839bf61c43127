"""Label values of the power exporter do not depend on how many members a Redfish service lists: a
BMC firmware update that starts listing a backplane chassis, a PDU chained behind another, a second
CDU or coolant connector must not rename the series of the member that was already there.

The services here are the DMTF mockups with one collection rewritten to list the given members, each
a copy of the mockup's own member (its documents with the member's URI and Id substituted)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockstep.exporters.power.bmc import poll_bmc
from lockstep.exporters.power.cdu import poll_cdu
from lockstep.exporters.power.config import Target
from lockstep.exporters.power.pdu import poll_pdu
from lockstep.exporters.power.redfish import Fetch, RedfishError, lowest_id
from tests.helpers.paths import FIXTURES

REDFISH = FIXTURES / "redfish"
CONNECTORS = "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors"


def service(mockup: Path, collection: str, template: str, ids: list[str]) -> Fetch:
    """``mockup`` with ``/redfish/v1/<collection>`` listing ``ids``, each a copy of member ``template``."""
    base = f"/redfish/v1/{collection}"

    async def fetch(odata_id: str, static: bool = False) -> dict:
        if odata_id == base:
            return {"@odata.id": base, "Members": [{"@odata.id": f"{base}/{i}"} for i in ids]}
        member, rest = None, ""
        if odata_id.startswith(base + "/"):
            member, _, rest = odata_id.removeprefix(base + "/").partition("/")
            odata_id = f"{base}/{template}" + (f"/{rest}" if rest else "")
        file = mockup / odata_id.removeprefix("/redfish/v1/") / "index.json"
        if not file.is_file():
            raise RedfishError(f"GET {odata_id}: HTTP 404")
        text = file.read_text()
        if member is None:
            return json.loads(text)
        doc = json.loads(text.replace(f'{base}/{template}"', f'{base}/{member}"')
                         .replace(f"{base}/{template}/", f"{base}/{member}/"))
        if not rest:
            doc["Id"] = member
        return doc

    return fetch


async def series(walk, kind: str, fetch: Fetch) -> dict[tuple, float]:
    """{(metric, (label, value), ...): value} of one poll of a target named ``<kind>1``."""
    samples = await walk(Target(f"{kind}1", kind, "http://mockup", rack="r1"), fetch)
    found = {(s.metric.name, *zip(s.metric.labels, s.labels)): s.value for s in samples}
    assert len(found) == len(samples), "two members produced the same series"
    return found


async def alone_and_listed(walk, kind: str, mockup: str, collection: str, member: str,
                           ids: list[str]) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """The series of one poll with ``collection`` listing ``member`` alone, and listing ``ids``."""
    alone = await series(walk, kind, service(REDFISH / mockup, collection, member, [member]))
    return alone, await series(walk, kind, service(REDFISH / mockup, collection, member, ids))


def label_values(found: dict[tuple, float], label: str) -> set[str]:
    return {value for key in found for name, value in key[1:] if name == label}


@pytest.mark.parametrize("ids", [["1U", "Backplane"], ["Backplane", "1U"]])
async def test_a_bmc_listing_another_chassis_renames_no_psu(ids):
    """Before: psu was ``Bay1`` with one chassis and ``1U/Bay1`` as soon as the BMC listed a second."""
    alone, both = await alone_and_listed(poll_bmc, "bmc", "public-rackmount1", "Chassis", "1U", ids)
    assert label_values(alone, "psu") == {"Bay1"}
    assert alone.items() <= both.items()
    assert label_values(both, "chassis") == {"1U", "Backplane"}


@pytest.mark.parametrize("ids", [["1", "2"], ["2", "1"]])
async def test_a_pdu_chained_on_keeps_the_target_name_for_the_first(ids):
    """Before: the pdu label was ``pdu1`` with one RackPDU and ``pdu1:1`` with two."""
    alone, both = await alone_and_listed(poll_pdu, "pdu", "public-pdu", "PowerEquipment/RackPDUs", "1", ids)
    assert label_values(alone, "pdu") == {"pdu1"}
    assert alone.items() <= both.items()
    assert label_values(both, "pdu") == {"pdu1", "pdu1:2"}


@pytest.mark.parametrize("ids", [["1", "2"], ["2", "1"]])
async def test_a_second_cdu_renames_no_loop_pump_or_detector(ids):
    """Before: every loop, pump and detector of CDU 1 took a ``1/`` prefix once a second CDU was listed,
    and the ``loop="supply"`` of the CoolantTemperatureHigh alert matched nothing any more."""
    alone, both = await alone_and_listed(poll_cdu, "cdu", "public-cooling-unit", "ThermalEquipment/CDUs", "1", ids)
    assert {"supply", "return", "facility_supply"} <= label_values(alone, "loop")
    assert alone.items() <= both.items()
    added = {key: v for key, v in both.items() if key not in alone}
    assert {"2/supply", "2/return", "2/facility_supply", "2/rack", "2/facility"} <= label_values(added, "loop")
    assert label_values(added, "pump") == {"2/1", "2/2"}
    assert label_values(added, "detector") == {"2/Moisture", "2/Overflow"}


async def test_a_second_rack_side_connector_keeps_the_plain_supply_loop():
    """Before: two secondary connectors were ``rack1_supply`` and ``rack2_supply``, none ``supply``."""
    alone, both = await alone_and_listed(poll_cdu, "cdu", "public-cooling-unit", CONNECTORS, "1", ["2", "1"])
    assert alone.items() <= both.items()
    added = {key for key in both if key not in alone}
    assert label_values(dict.fromkeys(added), "loop") == {"rack2_supply", "rack2_return", "rack2"}


def test_lowest_id_orders_numbers_as_numbers():
    assert lowest_id(["10", "9", "2"]) == "2"
    assert lowest_id(["B", "A"]) == "A"
    assert lowest_id([]) is None
