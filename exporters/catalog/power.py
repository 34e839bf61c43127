"""Rack power and cooling metrics from the power exporter (Redfish BMCs, PDUs, CDUs; IPMI DCMI)."""
from lockstep.exporters.catalog.model import counter, gauge

T = ("target",)
PDU = ("pdu", "rack")

CHASSIS_POWER = gauge("lockstep_chassis_power_watts", "Server (chassis) input power reported by its BMC: the chassis "
                      "its Redfish ComputerSystem links (Links.Chassis), else the first chassis listed with a "
                      "power reading.", T, "watts")
PDU_POWER = gauge("lockstep_pdu_power_watts", "Rack PDU input power.", ("pdu", "rack"), "watts")
PDU_ENERGY = counter("lockstep_pdu_energy_joules_total", "Rack PDU energy (Redfish reports kWh).", ("pdu", "rack"), "joules")
RACK_BUDGET = gauge("lockstep_rack_power_budget_watts", "Rack breaker budget from the power exporter config.",
                    ("rack",), "watts")
COOLANT_TEMPERATURE = gauge("lockstep_coolant_temperature_celsius",
                            "Coolant temperature at a CDU. loop: supply, return (the rack-side loop); facility_supply, "
                            "facility_return (the facility water side).",
                            ("target", "loop"), "celsius")
REDFISH_UP = gauge("lockstep_redfish_up", "1 if the last poll of the target succeeded, 0 otherwise.", T)

CHASSIS_POWER_LIMIT = gauge("lockstep_chassis_power_limit_watts",
                            "Power limit (cap) set on the chassis by its BMC.", T, "watts")
# A BMC may list several chassis (enclosure, baseboard, backplane), and a firmware update may add one:
# the chassis is a label of its own, so the psu value never changes with the number of chassis.
PSU = ("target", "chassis", "psu")
PSU_INPUT_POWER = gauge("lockstep_psu_input_power_watts", "Input power of one power supply of a server. chassis: "
                        "the Redfish Chassis Id the supply belongs to; psu: its PowerSupply Id there.", PSU, "watts")
PSU_ENERGY = counter("lockstep_psu_energy_joules_total", "Energy drawn by one power supply (Redfish reports kWh). "
                     "chassis: the Redfish Chassis Id; psu: the PowerSupply Id.", PSU, "joules")
PDU_OUTLET_POWER = gauge("lockstep_pdu_outlet_power_watts", "Power drawn from one PDU outlet.",
                         PDU + ("outlet",), "watts")
PDU_OUTLET_ENERGY = counter("lockstep_pdu_outlet_energy_joules_total",
                            "Energy drawn from one PDU outlet (Redfish reports kWh).", PDU + ("outlet",), "joules")
PDU_MAINS_POWER = gauge("lockstep_pdu_mains_power_watts",
                        "Power on one line of a PDU mains input circuit. line: Line1ToNeutral, Line1ToLine2, ... "
                        "(total for a circuit without per-line readings).", PDU + ("circuit", "line"), "watts")
PDU_MAINS_CURRENT = gauge("lockstep_pdu_mains_current_amperes",
                          "Current on one line of a PDU mains input circuit (breakers trip on current). "
                          "line: Line1, Line2, Line3, Neutral (total for single phase).", PDU + ("circuit", "line"))
PDU_MAINS_VOLTAGE = gauge("lockstep_pdu_mains_voltage_volts",
                          "Voltage on one line of a PDU mains input circuit.", PDU + ("circuit", "line"))
COOLANT_FLOW = gauge("lockstep_coolant_flow_cubic_meters_per_second",
                     "Coolant flow through a CDU loop (Redfish reports L/min). loop: rack, facility.", ("target", "loop"),
                     "cubic_meters_per_second")
COOLANT_PRESSURE = gauge("lockstep_coolant_pressure_pascals",
                         "Coolant pressure at a CDU (Redfish reports kPa). loop: supply, return (rack side), "
                         "facility_supply, facility_return.", ("target", "loop"), "pascals")
CDU_HEAT_REMOVED = gauge("lockstep_cdu_heat_removed_watts",
                         "Heat removed by a CDU loop (Redfish reports kW). loop: rack, facility.",
                         ("target", "loop"), "watts")
CDU_PUMP_SPEED = gauge("lockstep_cdu_pump_speed_ratio", "CDU pump speed as a fraction of its maximum.",
                       ("target", "pump"), "ratio")
CDU_PUMP_STATE = gauge("lockstep_cdu_pump_state",
                       "Always 1; state is the pump's Redfish Status.State (Enabled = running; UnavailableOffline, "
                       "StandbyOffline, Disabled, Absent, ... = not pumping).", ("target", "pump", "state"))
LEAK_DETECTOR_STATE = gauge("lockstep_leak_detector_state",
                            "1 for the detector's current state, 0 for the others. state: OK, Warning, Critical "
                            "(Redfish DetectorState; Warning or Critical means liquid was detected).",
                            ("target", "detector", "state"))
TARGET_INFO = gauge("lockstep_power_target_info",
                    "Always 1; the kind (bmc, pdu, cdu, ipmi) and rack of a configured power exporter target.",
                    ("target", "kind", "rack"))
REDFISH_LAST_SUCCESS = gauge("lockstep_redfish_last_success_timestamp_seconds",
                             "Unix time of the last successful poll of the target.", T, "seconds")
REDFISH_POLL_DURATION = gauge("lockstep_redfish_poll_duration_seconds",
                              "Wall-clock time the last poll of the target took.", T, "seconds")
REDFISH_INVALID_READINGS = gauge("lockstep_redfish_invalid_readings",
                                 "Readings the last poll of the target left out because they were not finite "
                                 "numbers (NaN, +Inf, -Inf, a number past a float's range); absent when there were none.", T)
REDFISH_SKIPPED_MEMBERS = gauge("lockstep_redfish_skipped_members",
                                "Members of the target's Redfish collections and arrays past the power exporter's "
                                "cap per array, which the last poll did not read; absent when there were none.", T)
REDFISH_LONG_LABELS = gauge("lockstep_redfish_long_labels",
                            "Label values from the target's answers (chassis, PSU, outlet, circuit, pump, detector "
                            "names) longer than 128 characters, which the last poll served shortened to their first "
                            "115 characters, '~' and 12 hex digits of their SHA-256; absent when there were none.", T)

METRICS = (CHASSIS_POWER, PDU_POWER, PDU_ENERGY, RACK_BUDGET, COOLANT_TEMPERATURE, REDFISH_UP,
           CHASSIS_POWER_LIMIT, PSU_INPUT_POWER, PSU_ENERGY, PDU_OUTLET_POWER, PDU_OUTLET_ENERGY, PDU_MAINS_POWER,
           PDU_MAINS_CURRENT, PDU_MAINS_VOLTAGE, COOLANT_FLOW, COOLANT_PRESSURE, CDU_HEAT_REMOVED, CDU_PUMP_SPEED,
           CDU_PUMP_STATE, LEAK_DETECTOR_STATE, TARGET_INFO, REDFISH_LAST_SUCCESS, REDFISH_POLL_DURATION,
           REDFISH_INVALID_READINGS, REDFISH_SKIPPED_MEMBERS, REDFISH_LONG_LABELS)
