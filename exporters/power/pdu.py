"""Rack PDU power from ``PowerEquipment/RackPDUs/{id}``: ``Metrics`` (input power, energy),
``Outlets/{id}`` (per-outlet power and energy) and ``Mains/{id}`` (per-line power, current, voltage
of each input circuit). Redfish energy is in kWh.

The ``pdu`` label is the target's name, so that a one-PDU target reads as configured. A service that
lists several RackPDUs (units daisy-chained behind the one at the configured address) keeps the
target's name for its lowest Id and labels the others ``<target>:<Id>``: chaining a unit on adds a
series and renames none. Rack totals and budgets join on ``rack``, which comes from the config."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lockstep.exporters.catalog import power as m
from lockstep.exporters.power.bmc import KWH_JOULES
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
    reading,
    text,
)
from lockstep.exporters.toolkit.sample import Sample


@dataclass(frozen=True, slots=True)
class OutletReading:
    outlet: str
    power_watts: float | None
    energy_joules: float | None


@dataclass(frozen=True, slots=True)
class CircuitReading:
    circuit: str
    # (line, value) per quantity; line "total" for a circuit without per-line readings
    power_watts: tuple[tuple[str, float], ...]
    current_amperes: tuple[tuple[str, float], ...]
    voltage_volts: tuple[tuple[str, float], ...]


def _joules(doc: dict[str, Any] | None) -> float | None:
    kwh = reading(doc, "EnergykWh")
    return None if kwh is None else kwh * KWH_JOULES


def parse_metrics(doc: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """``PowerDistributionMetrics``: (input watts, energy joules)."""
    return reading(doc, "PowerWatts"), _joules(doc)


def parse_outlet(doc: dict[str, Any]) -> OutletReading:
    return OutletReading(text(doc.get("Id")), reading(doc, "PowerWatts"), _joules(doc))


def _lines(doc: dict[str, Any], poly: str, single: str) -> tuple[tuple[str, float], ...]:
    excerpts = doc.get(poly)
    if isinstance(excerpts, dict) and excerpts:
        found = ((line, reading(excerpts, line)) for line in array(list(excerpts), poly))
        return tuple((line, value) for line, value in found if value is not None)
    total = reading(doc, single)
    return () if total is None else (("total", total),)


def parse_circuit(doc: dict[str, Any]) -> CircuitReading:
    """A mains ``Circuit``: PolyPhase* excerpts per line, else the single-phase reading."""
    return CircuitReading(text(doc.get("Id")), _lines(doc, "PolyPhasePowerWatts", "PowerWatts"),
                          _lines(doc, "PolyPhaseCurrentAmps", "CurrentAmps"),
                          _lines(doc, "PolyPhaseVoltage", "Voltage"))


async def read_pdu(fetch: Fetch, odata_id: str, pdu: str, rack: str) -> list[Sample]:
    doc = await fetch(odata_id, static=True)
    metrics, outlets, mains = await gather(
        maybe(fetch, link(doc, "Metrics")), collection(fetch, link(doc, "Outlets")),
        collection(fetch, link(doc, "Mains")))
    labels = (pdu, rack)
    out: list[Sample] = []
    power, energy = parse_metrics(metrics)
    if power is not None:
        out.append(Sample(m.PDU_POWER, labels, power))
    if energy is not None:
        out.append(Sample(m.PDU_ENERGY, labels, energy))
    for o in map(parse_outlet, outlets):
        if o.power_watts is not None:
            out.append(Sample(m.PDU_OUTLET_POWER, labels + (o.outlet,), o.power_watts))
        if o.energy_joules is not None:
            out.append(Sample(m.PDU_OUTLET_ENERGY, labels + (o.outlet,), o.energy_joules))
    for c in map(parse_circuit, mains):
        for metric, lines in ((m.PDU_MAINS_POWER, c.power_watts), (m.PDU_MAINS_CURRENT, c.current_amperes),
                              (m.PDU_MAINS_VOLTAGE, c.voltage_volts)):
            out.extend(Sample(metric, labels + (c.circuit, line), value) for line, value in lines)
    return out


async def poll_pdu(target: Target, fetch: Fetch) -> list[Sample]:
    root = await fetch(SERVICE_ROOT, static=True)
    equipment = await maybe(fetch, link(root, "PowerEquipment"), static=True)
    collection = link(equipment or {}, "RackPDUs")
    if collection is None:
        raise RedfishError("service links no PowerEquipment/RackPDUs collection", layout_changed=True)
    uris = members(await fetch(collection, static=True))
    head = lowest_id(map(member_id, uris))
    names = [target.name if member_id(u) == head else f"{target.name}:{member_id(u)}" for u in uris]
    found = await each(lambda un: read_pdu(fetch, *un, target.rack), list(zip(uris, names)))
    return [s for pdu in found for s in pdu]
