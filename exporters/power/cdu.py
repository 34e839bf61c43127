"""Coolant distribution units from ``ThermalEquipment/CDUs/{id}``: primary (facility) and secondary
(rack) ``CoolantConnectors`` (supply/return temperature and pressure, flow, heat removed),
``Pumps/{id}`` (speed, state) and ``LeakDetection`` (detector states).

Label values do not depend on how many siblings a service lists. The CDU with the lowest Id (the
only one, usually) names its loops, pumps and detectors plainly; any other CDU of the service
prefixes them with its Id (``2/supply``, ``2/facility_return``, pump ``2/1``). Likewise the
connector with the lowest Id on each side is the plain loop (``rack``: supply, return) and another
is ``rack<Id>``. So a second CDU or connector showing up renames no series, and the alert on
``loop="supply"`` keeps its series."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lockstep.exporters.catalog import power as m
from lockstep.exporters.power.config import Target
from lockstep.exporters.power.redfish import (
    SERVICE_ROOT,
    Fetch,
    RedfishError,
    array,
    collection,
    each,
    gather,
    link,
    lowest_id,
    maybe,
    member_id,
    members,
    obj,
    reading,
    text,
)
from lockstep.exporters.toolkit.sample import Sample

LEAK_STATES = ("OK", "Warning", "Critical")  # DetectorState is a Resource.Health value
# Primary connectors face the facility water, secondary ones the racks' loop.
_SIDES = (("PrimaryCoolantConnectors", "facility"), ("SecondaryCoolantConnectors", "rack"))


@dataclass(frozen=True, slots=True)
class LoopReading:
    loop: str
    supply_celsius: float | None
    return_celsius: float | None
    flow_m3_per_s: float | None
    supply_pascals: float | None
    return_pascals: float | None
    heat_removed_watts: float | None


def _scaled(doc: dict[str, Any], key: str, factor: float) -> float | None:
    value = reading(doc, key)
    return None if value is None else value * factor


def parse_connector(doc: dict[str, Any], loop: str) -> LoopReading:
    """A ``CoolantConnector``: L/min -> m³/s, kPa -> Pa, kW -> W."""
    return LoopReading(loop, reading(doc, "SupplyTemperatureCelsius"), reading(doc, "ReturnTemperatureCelsius"),
                       _scaled(doc, "FlowLitersPerMinute", 1 / 60000), _scaled(doc, "SupplyPressurekPa", 1000.0),
                       _scaled(doc, "ReturnPressurekPa", 1000.0), _scaled(doc, "HeatRemovedkW", 1000.0))


def parse_pump(doc: dict[str, Any]) -> tuple[str, float | None, str | None]:
    """(pump id, speed ratio, Status.State)."""
    speed = reading(doc, "PumpSpeedPercent")
    state = obj(doc.get("Status")).get("State")
    return text(doc.get("Id")), None if speed is None else speed / 100.0, state if isinstance(state, str) else None


def parse_leak_detection(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(detector, DetectorState) from the ``LeakDetectorGroups[].Detectors[]`` excerpts; the detector
    is the last segment of its ``DataSourceUri`` (its Id), else its ``DeviceName``."""
    found = []
    for group in array(doc.get("LeakDetectorGroups")):
        for d in map(obj, array(obj(group).get("Detectors"))):
            uri, state = d.get("DataSourceUri"), d.get("DetectorState")
            name = member_id(uri) if isinstance(uri, str) and uri else text(d.get("DeviceName"))
            if name and isinstance(state, str):
                found.append((name, state))
    return found


async def _leaks(fetch: Fetch, odata_id: str | None) -> list[tuple[str, str]]:
    if odata_id is None:
        return []
    doc = await fetch(odata_id)
    found = parse_leak_detection(doc)
    if not found:  # no group excerpts: read the LeakDetectors collection itself
        found = [(text(d.get("Id")), d["DetectorState"]) for d in await collection(fetch, link(doc, "LeakDetectors"))
                 if isinstance(d.get("DetectorState"), str)]
    return found


async def read_cdu(fetch: Fetch, odata_id: str, name: str, prefix: str) -> list[Sample]:
    doc = await fetch(odata_id, static=True)
    primary, secondary, pumps, leaks = await gather(
        *(collection(fetch, link(doc, key)) for key, _ in _SIDES),
        collection(fetch, link(doc, "Pumps")), _leaks(fetch, link(doc, "LeakDetection")))
    out: list[Sample] = []
    for (_, side), connectors in zip(_SIDES, (primary, secondary)):
        head = lowest_id(text(c.get("Id")) for c in connectors)
        for c in connectors:
            loop = side if text(c.get("Id")) == head else f"{side}{text(c.get('Id'))}"
            out.extend(loop_samples(name, parse_connector(c, loop), prefix))
    for pump, speed, state in map(parse_pump, pumps):
        if speed is not None:
            out.append(Sample(m.CDU_PUMP_SPEED, (name, prefix + pump), speed))
        if state:
            out.append(Sample(m.CDU_PUMP_STATE, (name, prefix + pump, state), 1.0))
    for detector, state in leaks:
        out.extend(Sample(m.LEAK_DETECTOR_STATE, (name, prefix + detector, s), float(s == state))
                   for s in LEAK_STATES)
    return out


def loop_samples(name: str, r: LoopReading, prefix: str = "") -> list[Sample]:
    # The rack-side loop is the plain supply/return that alerts and the simulator's series use;
    # the others are qualified (facility_supply, rack2_return, ...).
    point = prefix + ("" if r.loop == "rack" else r.loop + "_")
    values = ((m.COOLANT_TEMPERATURE, point + "supply", r.supply_celsius),
              (m.COOLANT_TEMPERATURE, point + "return", r.return_celsius),
              (m.COOLANT_FLOW, prefix + r.loop, r.flow_m3_per_s),
              (m.COOLANT_PRESSURE, point + "supply", r.supply_pascals),
              (m.COOLANT_PRESSURE, point + "return", r.return_pascals),
              (m.CDU_HEAT_REMOVED, prefix + r.loop, r.heat_removed_watts))
    return [Sample(metric, (name, loop), v) for metric, loop, v in values if v is not None]


async def poll_cdu(target: Target, fetch: Fetch) -> list[Sample]:
    root = await fetch(SERVICE_ROOT, static=True)
    equipment = await maybe(fetch, link(root, "ThermalEquipment"), static=True) or {}
    collection = link(equipment, "CDUs")
    if collection is None:
        raise RedfishError("service links no ThermalEquipment/CDUs collection", layout_changed=True)
    uris = members(await fetch(collection, static=True))
    head = lowest_id(map(member_id, uris))
    prefixes = ["" if member_id(u) == head else member_id(u) + "/" for u in uris]
    found = await each(lambda up: read_cdu(fetch, up[0], target.name, up[1]), list(zip(uris, prefixes)))
    return [s for cdu in found for s in cdu]
