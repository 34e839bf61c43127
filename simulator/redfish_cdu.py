"""Redfish documents of the simulated coolant distribution unit, shaped like the DMTF mockup
fixtures/redfish/public-cooling-unit: ThermalEquipment/CDUs/1 with primary (facility) and secondary
(rack loop) coolant connectors, pumps, environment metrics and leak detection."""
from __future__ import annotations

from lockstep.simulator.redfish_docs import PowerSnapshot, R, _coll, _reading, _ref, _root, _status, _typed


def cdu(snap: PowerSnapshot) -> dict[str, dict]:
    u = f"{R}/ThermalEquipment/CDUs/1"
    docs = {
        R: _root(ThermalEquipment=f"{R}/ThermalEquipment"),
        f"{R}/ThermalEquipment": _typed("#ThermalEquipment.v1_2_0.ThermalEquipment", f"{R}/ThermalEquipment",
                                        "ThermalEquipment", "Cooling Equipment", CDUs=_ref(f"{R}/ThermalEquipment/CDUs")),
        f"{R}/ThermalEquipment/CDUs": _coll(f"{R}/ThermalEquipment/CDUs", "CDU Collection", [u], "CoolingUnit"),
        u: _typed("#CoolingUnit.v1_5_0.CoolingUnit", u, "1", "Cluster Cooling Distribution Unit", EquipmentType="CDU",
                  Status=_status(), Coolant={"CoolantType": "Water", "AdditiveName": "Glycol", "AdditivePercent": 20,
                                             "SpecificHeatkJoulesPerKgK": 3.974, "DensityKgPerCubicMeter": 1030},
                  PrimaryCoolantConnectors=_ref(f"{u}/PrimaryCoolantConnectors"),
                  SecondaryCoolantConnectors=_ref(f"{u}/SecondaryCoolantConnectors"), Pumps=_ref(f"{u}/Pumps"),
                  EnvironmentMetrics=_ref(f"{u}/EnvironmentMetrics"), LeakDetection=_ref(f"{u}/LeakDetection")),
        f"{u}/EnvironmentMetrics": _typed("#EnvironmentMetrics.v1_5_0.EnvironmentMetrics", f"{u}/EnvironmentMetrics",
                                          "EnvironmentMetrics", "CDU Environment Metrics",
                                          TemperatureCelsius=_reading(24.0), HumidityPercent=_reading(35.0)),
    }
    docs.update(_coolant_loops(u, snap.coolant))
    docs.update(_pumps(u))
    docs.update(_leak_detection(u))
    return docs


def _coolant_loops(u: str, cool: dict) -> dict[str, dict]:
    """Primary: facility water (14 C in); secondary: the rack loop the model heats."""
    rise = cool["return_c"] - cool["supply_c"]
    loops = {"Primary": ("Main supply from facility", 14.0, 14.0 + rise * 1.3, cool["flow_lpm"] * 0.8),
             "Secondary": ("Cooling connection to rack equipment", cool["supply_c"], cool["return_c"], cool["flow_lpm"])}
    docs = {}
    for side, (name, supply, ret, flow) in loops.items():
        base = f"{u}/{side}CoolantConnectors"
        docs[base] = _coll(base, f"{side} Cooling Loop Connection Collection", [f"{base}/1"], "CoolantConnector")
        docs[f"{base}/1"] = _typed("#CoolantConnector.v1_3_0.CoolantConnector", f"{base}/1", "1", name,
                                   Status=_status(), CoolantConnectorType="Pair",
                                   FlowLitersPerMinute=_reading(round(flow, 1)),
                                   SupplyTemperatureCelsius=_reading(round(supply, 2)),
                                   ReturnTemperatureCelsius=_reading(round(ret, 2)),
                                   DeltaTemperatureCelsius=_reading(round(ret - supply, 2)),
                                   HeatRemovedkW=_reading(round(cool["heat_w"] / 1000, 2)))
    return docs


def _pumps(u: str) -> dict[str, dict]:
    docs = {f"{u}/Pumps": _coll(f"{u}/Pumps", "Pump Collection", [f"{u}/Pumps/1", f"{u}/Pumps/2"], "Pump")}
    for n in (1, 2):
        docs[f"{u}/Pumps/{n}"] = _typed("#Pump.v1_2_0.Pump", f"{u}/Pumps/{n}", str(n), f"CDU Pump {n}",
                                        PumpType="Liquid", Status=_status(), PumpSpeedPercent=_reading(55.0))
    return docs


def _leak_detection(u: str) -> dict[str, dict]:
    leak = f"{u}/LeakDetection"
    detectors = {"Moisture": "Moisture Leak Detector", "Overflow": "Fluid Level Overflow"}
    group = {"GroupName": "Detectors in the CDU", "Status": {"Health": "OK"},
             "Detectors": [{"DataSourceUri": f"{leak}/LeakDetectors/{k}", "DeviceName": v, "DetectorState": "OK"}
                           for k, v in detectors.items()]}
    docs = {leak: _typed("#LeakDetection.v1_2_0.LeakDetection", leak, "LeakDetection", "Leak Detection Systems",
                         Status=_status(), LeakDetectorGroups=[group]),
            f"{leak}/LeakDetectors": _coll(f"{leak}/LeakDetectors", "CDU Leak Detector Collection",
                                           [f"{leak}/LeakDetectors/{k}" for k in detectors], "LeakDetector")}
    for k, v in detectors.items():
        docs[f"{leak}/LeakDetectors/{k}"] = _typed("#LeakDetector.v1_2_0.LeakDetector", f"{leak}/LeakDetectors/{k}", k, v,
                                                   LeakDetectorType=k, DetectorState="OK", Status=_status())
    return docs
