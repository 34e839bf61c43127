"""Server power from a BMC's Redfish service: ``Chassis/{id}/EnvironmentMetrics`` (PowerWatts),
``Chassis/{id}/PowerSubsystem/PowerSupplies/{id}/Metrics`` (PSU input watts) and, as a fallback, the
deprecated ``Chassis/{id}/Power`` (PowerControl PowerConsumedWatts; deprecated since Power v1_7_0,
still the only source on many fleets).

Which chassis is the server's: a BMC may list several (enclosure, baseboard, backplane, a storage
enclosure ahead of the server on some firmware), in any order, and an update may add one. The
server's is the one its ``ComputerSystem`` links (``Systems`` members -> ``Links.Chassis``, "the
chassis that contains this system"); where a system links several, the first of those, in link
order, that has a power reading. While no linked chassis has a reading, there is no chassis power
(another chassis' reading is not the server's). Only a service with no Systems, whose Systems fail
to load, or whose systems link no listed chassis, falls back to the first chassis of the collection with a power reading.
``ChassisType`` plays no part: it names a form factor, and "Enclosure" is the schema's catch-all.
The systems are structural (fetched ``static``), so the choice costs no request after discovery."""
from __future__ import annotations

import asyncio
import logging
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
    maybe,
    member_id,
    members,
    number_at,
    obj,
    odata_id,
    reading,
    text,
)
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.power")

KWH_JOULES = 3.6e6


@dataclass(frozen=True, slots=True)
class PsuReading:
    psu: str
    input_watts: float | None
    energy_joules: float | None


@dataclass(frozen=True, slots=True)
class ChassisPower:
    chassis: str
    power_watts: float | None
    limit_watts: float | None
    psus: tuple[PsuReading, ...]


def parse_psu(psu: dict[str, Any], metrics: dict[str, Any] | None) -> PsuReading:
    """A ``PowerSupply`` and its ``PowerSupplyMetrics`` (None when the PSU links none)."""
    energy = reading(metrics, "EnergykWh")
    return PsuReading(text(psu.get("Id")), reading(metrics, "InputPowerWatts"),
                      None if energy is None else energy * KWH_JOULES)


def parse_legacy_psus(power: dict[str, Any]) -> list[PsuReading]:
    """``Power.PowerSupplies[]`` of the deprecated ``Power`` resource (``PowerInputWatts``)."""
    return [PsuReading(text(p.get("MemberId"), str(i)), number_at(p, "PowerInputWatts"), None)
            for i, p in enumerate(array(power.get("PowerSupplies"))) if isinstance(p, dict)]


def _power_control(power: dict[str, Any] | None) -> dict[str, Any]:
    controls = array(obj(power).get("PowerControl"))
    return obj(controls[0]) if controls else {}


def chassis_power(chassis: str, env: dict[str, Any] | None, psus: list[PsuReading],
                  legacy: dict[str, Any] | None) -> ChassisPower:
    """The fallback order in one place: EnvironmentMetrics, then the sum of PSU inputs, then
    the deprecated PowerControl[0].PowerConsumedWatts."""
    inputs = [p.input_watts for p in psus if p.input_watts is not None]
    control = _power_control(legacy)
    power = reading(env, "PowerWatts")
    if power is None and inputs:
        power = sum(inputs)
    if power is None:
        power = number_at(control, "PowerConsumedWatts")
    limit = reading(env, "PowerLimitWatts", "SetPoint")
    if limit is None:
        limit = reading(control, "PowerLimit", "LimitInWatts")
    return ChassisPower(chassis, power, limit, tuple(psus))


async def _psu(fetch: Fetch, odata_id: str) -> PsuReading | None:
    psu = await fetch(odata_id, static=True)
    if obj(psu.get("Status")).get("State") == "Absent":
        return None  # an empty bay
    return parse_psu(psu, await maybe(fetch, link(psu, "Metrics")))


async def _psus(fetch: Fetch, subsystem_id: str) -> list[PsuReading]:
    subsystem = await fetch(subsystem_id, static=True)
    collection = await maybe(fetch, link(subsystem, "PowerSupplies"), static=True)
    found = await each(lambda i: _psu(fetch, i), members(collection or {}))
    return [p for p in found if p is not None]


async def read_chassis(fetch: Fetch, odata_id: str) -> ChassisPower:
    chassis = await fetch(odata_id, static=True)
    subsystem_id = link(chassis, "PowerSubsystem")
    env, psus = await gather(maybe(fetch, link(chassis, "EnvironmentMetrics")),
                             _psus(fetch, subsystem_id) if subsystem_id else asyncio.sleep(0, []))
    legacy = None
    no_reading = reading(env, "PowerWatts") is None and all(p.input_watts is None for p in psus)
    if no_reading or not subsystem_id:
        legacy = await maybe(fetch, link(chassis, "Power"))
        if not subsystem_id and legacy:
            psus = parse_legacy_psus(legacy)
    return chassis_power(text(chassis.get("Id"), member_id(odata_id)), env, psus, legacy)


def chassis_links(system: dict[str, Any]) -> list[str]:
    """``Links.Chassis`` of a ``ComputerSystem``: the chassis that contain it."""
    refs = array(obj(system.get("Links")).get("Chassis"))
    return [ref for r in refs if (ref := odata_id(r)) is not None]


def server_chassis(found: dict[str, ChassisPower], linked: list[str]) -> ChassisPower | None:
    """The server's chassis by the rule of the module docstring; ``found`` by ``@odata.id`` in the
    collection's order. Summing several instead would count nested chassis twice."""
    candidates = [found[i] for i in linked if i in found] or found.values()
    return next((c for c in candidates if c.power_watts is not None), None)


async def _linked_chassis(target: Target, fetch: Fetch, root: dict[str, Any]) -> list[str]:
    try:
        systems = await collection(fetch, link(root, "Systems"), static=True)
    except RedfishError as exc:
        # The readings are still good: a service whose Systems fail answers with the fallback rule
        # (until a discovery succeeds and is cached) rather than with no power at all.
        once(log, logging.WARNING, f"systems:{target.name}", "%s: Systems unreadable (%s); the server's "
             "chassis is the first one listed with a power reading", target.name, exc)
        return []
    return [_path(i) for s in systems for i in chassis_links(s)]


def _path(odata_id: str) -> str:
    return odata_id.rstrip("/")  # links and members may differ by a trailing slash


async def poll_bmc(target: Target, fetch: Fetch) -> list[Sample]:
    root = await fetch(SERVICE_ROOT, static=True)
    collection_id = link(root, "Chassis")
    if collection_id is None:
        raise RedfishError("service root links no Chassis collection", layout_changed=True)
    chassis_ids = members(await fetch(collection_id, static=True))
    linked, found = await gather(_linked_chassis(target, fetch, root),
                                 each(lambda i: read_chassis(fetch, i), chassis_ids))
    main = server_chassis(dict(zip(map(_path, chassis_ids), found)), linked)
    return samples(target.name, found, main)


def samples(name: str, found: list[ChassisPower], main: ChassisPower | None) -> list[Sample]:
    out: list[Sample] = []
    if main is not None:
        out.append(Sample(m.CHASSIS_POWER, (name,), main.power_watts))
        if main.limit_watts is not None:
            out.append(Sample(m.CHASSIS_POWER_LIMIT, (name,), main.limit_watts))
    for c in found:
        for p in c.psus:
            labels = (name, c.chassis, p.psu)  # psu Ids are unique only within their chassis
            if p.input_watts is not None:
                out.append(Sample(m.PSU_INPUT_POWER, labels, p.input_watts))
            if p.energy_joules is not None:
                out.append(Sample(m.PSU_ENERGY, labels, p.energy_joules))
    return out
