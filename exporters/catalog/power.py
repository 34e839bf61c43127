"""Rack power and cooling metrics from the power exporter (Redfish BMCs, PDUs, CDUs; IPMI DCMI)."""
from exporters.catalog.model import gauge, counter

T = ("target",)

CHASSIS_POWER = gauge("lockstep_chassis_power_watts", "Server (chassis) input power reported by its BMC.", T, "watts")
PDU_POWER = gauge("lockstep_pdu_power_watts", "Rack PDU input power.", ("pdu", "rack"), "watts")
PDU_ENERGY = counter("lockstep_pdu_energy_joules_total", "Rack PDU energy (Redfish reports kWh).", ("pdu", "rack"), "joules")
RACK_BUDGET = gauge("lockstep_rack_power_budget_watts", "Rack breaker budget from the power exporter config.",
                    ("rack",), "watts")
COOLANT_TEMPERATURE = gauge("lockstep_coolant_temperature_celsius",
                            "Coolant temperature at a CDU. loop: supply, return (or the unit's own loop names).",
                            ("target", "loop"), "celsius")
REDFISH_UP = gauge("lockstep_redfish_up", "1 if the last poll of the target succeeded, 0 otherwise.", T)

METRICS = (CHASSIS_POWER, PDU_POWER, PDU_ENERGY, RACK_BUDGET, COOLANT_TEMPERATURE, REDFISH_UP)
