"""Redfish documents of the simulated devices, shaped like the DMTF mockups in fixtures/redfish:
a server BMC (public-rackmount1: Chassis Power, PowerSubsystem, EnvironmentMetrics) and a rack PDU
(public-pdu: PowerEquipment/RackPDUs/1 Metrics, Mains, Outlets); the CDU is in redfish_cdu.py. ``@odata.id`` values are the
standard ``/redfish/v1/...`` paths; the per-device path prefix lives only in the service URL."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

R = "/redfish/v1"
PSUS = 6  # a DGX H100 has six 3.3 kW supplies


@dataclass(frozen=True)
class PowerSnapshot:
    """The model's power and cooling state at one tick (copied out of ``State``)."""

    timestamp: float
    chassis_w: np.ndarray
    chassis_j: np.ndarray
    pdu_w: np.ndarray
    pdu_j: np.ndarray
    coolant: dict


def _ref(path: str) -> dict:
    return {"@odata.id": path}


def _coll(path: str, name: str, members: list[str], kind: str) -> dict:
    return {"@odata.type": f"#{kind}Collection.{kind}Collection", "Name": name, "@odata.id": path,
            "Members@odata.count": len(members), "Members": [_ref(m) for m in members]}


def _root(**links: str) -> dict:
    doc = {"@odata.type": "#ServiceRoot.v1_20_0.ServiceRoot", "Id": "RootService", "Name": "Root Service",
           "RedfishVersion": "1.15.0", "@odata.id": f"{R}/"}
    doc.update({k: _ref(v) for k, v in links.items()})
    return doc


def _reading(value: float, **extra) -> dict:
    return {"Reading": value, **extra}


def _status() -> dict:
    return {"State": "Enabled", "Health": "OK"}


def _typed(kind: str, path: str, ident: str, name: str, **fields) -> dict:
    return {"@odata.type": kind, "Id": ident, "Name": name, "@odata.id": path, **fields}


def bmc(node: str, i: int, snap: PowerSnapshot) -> dict[str, dict]:
    c, system = f"{R}/Chassis/1", f"{R}/Systems/1"
    watts = float(snap.chassis_w[i])
    kwh = round(float(snap.chassis_j[i]) / 3.6e6, 3)
    docs = {
        R: _root(Chassis=f"{R}/Chassis", Systems=f"{R}/Systems"),
        f"{R}/Systems": _coll(f"{R}/Systems", "Computer System Collection", [system], "ComputerSystem"),
        system: _typed("#ComputerSystem.v1_22_0.ComputerSystem", system, "1", node, SystemType="Physical",
                       PowerState="On", Status=_status(), Links={"Chassis": [_ref(c)]}),
        f"{R}/Chassis": _coll(f"{R}/Chassis", "Chassis Collection", [c], "Chassis"),
        c: _typed("#Chassis.v1_28_0.Chassis", c, "1", f"{node} chassis", ChassisType="RackMount",
                  Links={"ComputerSystems": [_ref(system)]},
                  Manufacturer="NVIDIA", Model="DGX H100", SerialNumber=f"SIM{i:06d}", PowerState="On",
                  Status=_status(), PowerSubsystem=_ref(f"{c}/PowerSubsystem"),
                  EnvironmentMetrics=_ref(f"{c}/EnvironmentMetrics"), Power=_ref(f"{c}/Power"),
                  **{"Power@Redfish.Deprecated": f"Please migrate to use {c}/PowerSubsystem"}),
        f"{c}/Power": _legacy_power(c, watts),
        f"{c}/PowerSubsystem": _typed("#PowerSubsystem.v1_1_3.PowerSubsystem", f"{c}/PowerSubsystem",
                                      "PowerSubsystem", "Power Subsystem for Chassis", CapacityWatts=10200,
                                      Status=_status(), PowerSupplies=_ref(f"{c}/PowerSubsystem/PowerSupplies")),
        f"{c}/EnvironmentMetrics": _typed("#EnvironmentMetrics.v1_5_0.EnvironmentMetrics", f"{c}/EnvironmentMetrics",
                                          "EnvironmentMetrics", "Chassis Environment Metrics",
                                          PowerWatts=_reading(watts), EnergykWh=_reading(kwh)),
    }
    docs.update(_power_supplies(c, watts, kwh))
    return docs


def _legacy_power(c: str, watts: float) -> dict:
    """``Chassis/{id}/Power`` (deprecated since Power v1_7_0, still served by real fleets)."""
    control = {"@odata.id": f"{c}/Power#/PowerControl/0", "MemberId": "0", "Name": "System Input Power",
               "PowerConsumedWatts": watts, "PowerCapacityWatts": 10200, "Status": _status()}
    supplies = [{"@odata.id": f"{c}/Power#/PowerSupplies/{n}", "MemberId": str(n), "Name": f"PSU{n + 1}",
                 "PowerInputWatts": round(watts / PSUS, 1), "PowerCapacityWatts": 3300, "Status": _status()}
                for n in range(PSUS)]
    return _typed("#Power.v1_7_3.Power", f"{c}/Power", "Power", "Power", PowerControl=[control],
                  PowerSupplies=supplies)


def _power_supplies(c: str, watts: float, kwh: float) -> dict[str, dict]:
    base = f"{c}/PowerSubsystem/PowerSupplies"
    psus = [f"{base}/PSU{n + 1}" for n in range(PSUS)]
    docs = {base: _coll(base, "Power Supply Collection", psus, "PowerSupply")}
    share = round(watts / PSUS, 1)
    for n, p in enumerate(psus):
        docs[p] = _typed("#PowerSupply.v1_6_0.PowerSupply", p, f"PSU{n + 1}", f"Power Supply {n + 1}",
                         PowerCapacityWatts=3300, Status=_status(), Metrics=_ref(f"{p}/Metrics"))
        docs[f"{p}/Metrics"] = _typed("#PowerSupplyMetrics.v1_2_0.PowerSupplyMetrics", f"{p}/Metrics", "Metrics",
                                      f"Metrics for Power Supply {n + 1}", InputPowerWatts=_reading(share),
                                      OutputPowerWatts=_reading(round(share * 0.96, 1)), InputVoltage=_reading(230.0),
                                      EnergykWh=_reading(round(kwh / PSUS, 3)))
    return docs


def pdu(rack: str, r: int, nodes: list[tuple[str, int]], snap: PowerSnapshot) -> dict[str, dict]:
    p = f"{R}/PowerEquipment/RackPDUs/1"
    watts, kwh = float(snap.pdu_w[r]), round(float(snap.pdu_j[r]) / 3.6e6, 3)
    docs = {
        R: _root(PowerEquipment=f"{R}/PowerEquipment"),
        f"{R}/PowerEquipment": _typed("#PowerEquipment.v1_2_3.PowerEquipment", f"{R}/PowerEquipment",
                                      "PowerEquipment", "DCIM Power Equipment",
                                      RackPDUs=_ref(f"{R}/PowerEquipment/RackPDUs")),
        f"{R}/PowerEquipment/RackPDUs": _coll(f"{R}/PowerEquipment/RackPDUs", "RackPDU Collection", [p],
                                              "PowerDistribution"),
        p: _typed("#PowerDistribution.v1_6_0.PowerDistribution", p, "1", f"{rack} rack PDU", EquipmentType="RackPDU",
                  PowerCapacityVA=69000, Status=_status(), Location={"Placement": {"Rack": rack}},
                  Mains=_ref(f"{p}/Mains"), Outlets=_ref(f"{p}/Outlets"), Metrics=_ref(f"{p}/Metrics")),
        f"{p}/Metrics": _typed("#PowerDistributionMetrics.v1_4_0.PowerDistributionMetrics", f"{p}/Metrics", "Metrics",
                               "Summary Metrics", EnergykWh=_reading(kwh),
                               PowerWatts=_reading(watts, ApparentVA=round(watts / 0.99, 1), PowerFactor=0.99)),
        f"{p}/Mains": _coll(f"{p}/Mains", "Mains Circuit Collection", [f"{p}/Mains/AC1"], "Circuit"),
        f"{p}/Mains/AC1": _typed("#Circuit.v1_9_0.Circuit", f"{p}/Mains/AC1", "AC1", "Mains AC Input",
                                 CircuitType="Mains", PhaseWiringType="ThreePhase5Wire", NominalVoltage="AC400V",
                                 RatedCurrentAmps=100, BreakerState="Normal", PowerWatts=_reading(watts),
                                 EnergykWh=_reading(kwh), Voltage=_reading(415.0), FrequencyHz=_reading(50.0),
                                 CurrentAmps=_reading(round(watts / (3 ** 0.5 * 415 * 0.99), 2))),
    }
    docs.update(_outlets(p, nodes, snap))
    return docs


def _outlets(p: str, nodes: list[tuple[str, int]], snap: PowerSnapshot) -> dict[str, dict]:
    """One outlet per server of the rack, A1, A2, ..."""
    paths = [f"{p}/Outlets/A{k + 1}" for k in range(len(nodes))]
    docs = {f"{p}/Outlets": _coll(f"{p}/Outlets", "Outlet Collection", paths, "Outlet")}
    for path, (name, i) in zip(paths, nodes):
        docs[path] = _typed("#Outlet.v1_4_4.Outlet", path, path.rsplit("/", 1)[1], f"Outlet for {name}",
                            PowerState="On", PowerEnabled=True, Status=_status(),
                            PowerWatts=_reading(round(float(snap.chassis_w[i]), 1)),
                            EnergykWh=_reading(round(float(snap.chassis_j[i]) / 3.6e6, 3)))
    return docs
