"""Pure parsers of the power exporter: IPMI DCMI text and Redfish documents from the DMTF mockups."""
from __future__ import annotations

import json

import pytest

from lockstep.exporters.power.bmc import chassis_power, parse_legacy_psus, parse_psu
from lockstep.exporters.power.cdu import parse_connector, parse_leak_detection, parse_pump
from lockstep.exporters.power.config import Credentials, Target
from lockstep.exporters.power.ipmi import command, parse_dcmi_power
from lockstep.exporters.power.pdu import parse_circuit, parse_metrics, parse_outlet
from tests.helpers.paths import FIXTURES

IPMI = FIXTURES / "ipmi"
RACKMOUNT = FIXTURES / "redfish/public-rackmount1/Chassis/1U"
CDU = FIXTURES / "redfish/public-cooling-unit/ThermalEquipment/CDUs/1"
PDU = FIXTURES / "redfish/public-pdu/PowerEquipment/RackPDUs/1"


def doc(path):
    return json.loads((path / "index.json").read_text())


@pytest.mark.parametrize("name, watts, active", [
    ("ipmitool-1.8.18.txt", 196.0, True), ("ipmitool-1.8.19.txt", 214.0, True),
    ("ipmi-dcmi.txt", 378.0, True), ("ipmitool-deactivated.txt", 0.0, False)])
def test_dcmi_power_text(name, watts, active):
    reading = parse_dcmi_power((IPMI / name).read_text())
    assert (reading.current_watts, reading.active) == (watts, active)


def test_dcmi_garbage_has_no_reading():
    assert parse_dcmi_power("Error: Unable to establish IPMI v2 / RMCP+ session\n").current_watts is None


def test_ipmitool_password_goes_through_the_environment_not_argv():
    target = Target("n1", "ipmi", "ipmi://10.0.0.7:6230", credentials=Credentials("admin", "s3cret"))
    argv, env = command(target)
    assert "s3cret" not in argv and env["IPMI_PASSWORD"] == "s3cret"
    assert argv[:7] == ["ipmitool", "-I", "lanplus", "-H", "10.0.0.7", "-p", "6230"]
    assert argv[-4:] == ["-E", "dcmi", "power", "reading"]
    local, _ = command(Target("n2", "ipmi", "local", ipmi_tool="/usr/sbin/ipmi-dcmi"))
    assert local == ["/usr/sbin/ipmi-dcmi", "--get-system-power-statistics"]


def test_chassis_power_fallback_order_on_the_rackmount_mockup():
    env, power = doc(RACKMOUNT / "EnvironmentMetrics"), doc(RACKMOUNT / "Power")
    bay1 = parse_psu(doc(RACKMOUNT / "PowerSubsystem/PowerSupplies/Bay1"),
                     doc(RACKMOUNT / "PowerSubsystem/PowerSupplies/Bay1/Metrics"))
    assert (bay1.psu, bay1.input_watts, bay1.energy_joules) == ("Bay1", 937.4, 325675 * 3.6e6)
    assert chassis_power("1U", env, [bay1], power).power_watts == env["PowerWatts"]["Reading"] == 374
    assert chassis_power("1U", None, [bay1], power).power_watts == 937.4  # PSU inputs
    legacy = chassis_power("1U", None, [], power)
    assert legacy.power_watts == power["PowerControl"][0]["PowerConsumedWatts"] == 344
    assert legacy.limit_watts == 500
    assert chassis_power("1U", None, [], None).power_watts is None
    assert [p.input_watts for p in parse_legacy_psus(power)] == [None]  # only LastPowerOutputWatts there


def test_pdu_documents():
    assert parse_metrics(doc(PDU / "Metrics")) == (6438.0, 56438 * 3.6e6)
    a1 = parse_outlet(doc(PDU / "Outlets/A1"))
    assert (a1.outlet, a1.power_watts, a1.energy_joules) == ("A1", 197.4, 36166 * 3.6e6)
    assert parse_outlet(doc(PDU / "Outlets/A5")).power_watts is None
    mains = parse_circuit(doc(PDU / "Mains/AC1"))
    assert dict(mains.current_amperes) == {"Line1": 8.02, "Line2": 8.66, "Line3": 6.91, "Neutral": 2.74}
    assert dict(mains.power_watts)["Line2ToNeutral"] == 231.5
    single = parse_circuit({"Id": "M", "PowerWatts": {"Reading": 1200}, "CurrentAmps": {"Reading": 5.2}})
    assert single.power_watts == (("total", 1200.0),) and single.voltage_volts == ()


def test_cdu_documents():
    primary = parse_connector(doc(CDU / "PrimaryCoolantConnectors/1"), "facility")
    assert (primary.supply_celsius, primary.return_celsius) == (30.0, 40.0)
    assert primary.flow_m3_per_s == pytest.approx(42 / 60000)  # 42 L/min
    assert (primary.supply_pascals, primary.heat_removed_watts) == (827000.0, 25480.0)
    assert parse_pump(doc(CDU / "Pumps/2")) == ("2", 0.0, "UnavailableOffline")
    assert parse_leak_detection(doc(CDU / "LeakDetection")) == [("Moisture", "OK"), ("Overflow", "OK")]
