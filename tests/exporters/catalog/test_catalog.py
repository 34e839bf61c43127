"""The metric catalog: contract names present, Prometheus naming rules enforced."""
import subprocess
import sys

import pytest

from lockstep.exporters.catalog import CATALOG, enums, get
from lockstep.exporters.catalog.model import Metric
from tests.helpers.paths import FIXTURES

CONTRACT = """lockstep_gpu_info lockstep_gpu_utilization_ratio lockstep_gpu_sm_active_ratio
lockstep_gpu_tensor_active_ratio lockstep_gpu_sm_clock_hertz lockstep_gpu_sm_clock_max_hertz lockstep_gpu_power_watts
lockstep_gpu_power_limit_watts lockstep_gpu_energy_joules_total lockstep_gpu_temperature_celsius
lockstep_gpu_memory_temperature_celsius lockstep_gpu_memory_used_bytes lockstep_gpu_memory_total_bytes
lockstep_gpu_clock_event_active lockstep_gpu_ecc_errors_total lockstep_gpu_remapped_rows lockstep_gpu_xid_errors_total
lockstep_gpu_pcie_replay_total lockstep_gpu_pcie_link_width lockstep_gpu_pcie_link_width_max
lockstep_gpu_pcie_link_generation lockstep_gpu_pcie_link_generation_max lockstep_gpu_nvlink_errors_total
lockstep_gpu_job_info lockstep_ib_port_transmit_bytes_total lockstep_ib_port_receive_bytes_total
lockstep_ib_port_transmit_packets_total lockstep_ib_port_receive_packets_total lockstep_ib_port_transmit_wait_total
lockstep_ib_port_symbol_errors_total lockstep_ib_port_link_downed_total lockstep_ib_port_link_error_recovery_total
lockstep_ib_port_receive_errors_total lockstep_ib_port_transmit_discards_total lockstep_ib_port_state
lockstep_ib_port_rate_bytes_per_second lockstep_roce_ecn_marked_packets_total lockstep_roce_cnp_sent_total
lockstep_roce_cnp_handled_total lockstep_roce_out_of_sequence_total lockstep_roce_local_ack_timeout_errors_total
lockstep_pfc_pause_frames_total lockstep_pfc_pause_duration_seconds_total lockstep_pfc_pause_storm_events_total
lockstep_storage_read_bytes_total lockstep_storage_write_bytes_total lockstep_storage_metadata_ops_total
lockstep_chassis_power_watts lockstep_pdu_power_watts lockstep_pdu_energy_joules_total
lockstep_rack_power_budget_watts lockstep_coolant_temperature_celsius lockstep_redfish_up
lockstep_scrape_collector_success lockstep_scrape_collector_duration_seconds lockstep_straggler_score
lockstep_job_stalled lockstep_job_lost_gpu_seconds_total lockstep_job_goodput_ratio
lockstep_storage_system_read_bytes_total lockstep_storage_system_write_bytes_total
lockstep_storage_system_operations_total lockstep_storage_system_operation_errors_total
lockstep_storage_system_operation_latency_seconds_total lockstep_storage_system_used_bytes
lockstep_storage_system_capacity_bytes lockstep_storage_system_objects lockstep_storage_system_target_info
lockstep_storage_system_up lockstep_storage_system_poll_duration_seconds lockstep_storage_system_poll_failures_total
lockstep_storage_system_last_success_timestamp_seconds
lockstep_gpu_peer_outlier_score lockstep_gpu_peer_degraded lockstep_gpu_peer_deviation""".split()

CONTRACT_LABELS = {
    "lockstep_gpu_clock_event_active": {"reason"}, "lockstep_gpu_ecc_errors_total": {"type"},
    "lockstep_gpu_xid_errors_total": {"xid"}, "lockstep_gpu_job_info": {"gpu", "job_id"},
    "lockstep_pfc_pause_frames_total": {"interface", "priority", "direction"},
    "lockstep_pfc_pause_storm_events_total": {"interface", "level"},
    "lockstep_storage_metadata_ops_total": {"mount", "op"}, "lockstep_pdu_power_watts": {"pdu", "rack"},
    "lockstep_coolant_temperature_celsius": {"target", "loop"}, "lockstep_straggler_score": {"job_id", "node", "gpu"},
    "lockstep_job_stalled": {"job_id", "cause"}, "lockstep_scrape_collector_success": {"collector"},
    "lockstep_storage_system_read_bytes_total": {"target", "scope", "name"},
    "lockstep_storage_system_write_bytes_total": {"target", "scope", "name"},
    "lockstep_storage_system_operations_total": {"target", "scope", "name", "op"},
    "lockstep_storage_system_operation_errors_total": {"target", "scope", "name", "class"},
    "lockstep_storage_system_operation_latency_seconds_total": {"target", "scope", "name", "op"},
    "lockstep_storage_system_used_bytes": {"target", "scope", "name"},
    "lockstep_storage_system_target_info": {"target", "kind", "address"},
    "lockstep_storage_system_up": {"target"}, "lockstep_storage_system_poll_failures_total": {"target", "reason"},
    "lockstep_gpu_peer_outlier_score": {"node", "gpu", "model"}, "lockstep_gpu_peer_deviation": {"feature"},
}


@pytest.mark.parametrize("name", CONTRACT)
def test_contract_metric_is_in_catalog(name):
    assert get(name).name == name


@pytest.mark.parametrize("name,labels", sorted(CONTRACT_LABELS.items()))
def test_contract_labels(name, labels):
    assert labels <= set(get(name).labels)


def test_unknown_metric_error_names_it():
    with pytest.raises(KeyError, match="lockstep_nope"):
        get("lockstep_nope")


@pytest.mark.parametrize("bad", [
    dict(name="lockstep_x_total", type="gauge", help="h"),
    dict(name="lockstep_x", type="counter", help="h"),
    dict(name="node_x", type="gauge", help="h"),
    dict(name="lockstep_x", type="gauge", help="h", labels=("job",)),
    dict(name="lockstep_x", type="gauge", help="h", unit="kilowatts"),
])
def test_naming_rules_are_enforced(bad):
    with pytest.raises(ValueError):
        Metric(**bad)


def test_no_series_carries_a_node_or_hostname_label_from_the_agent():
    agent_sections = ("gpu", "fabric", "storage", "health")
    from lockstep.exporters import catalog
    for section in agent_sections:
        for metric in getattr(catalog, section).METRICS:
            assert "node" not in metric.labels and "hostname" not in metric.labels, metric.name


@pytest.mark.integration
def test_importing_the_catalog_stays_light():
    code = ("import sys, exporters.catalog; "
            "print(','.join(m for m in ('pynvml','aiohttp','pandas','sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_catalog_help_is_set_everywhere():
    assert all(m.help.strip() for m in CATALOG.values())


# --- enum label values (exporters.catalog.enums) -------------------------------------------------

def test_clock_event_bits_are_nvmls_own():
    import pynvml
    nvml_names = {"gpu_idle": "GpuIdle", "applications_clocks_setting": "ApplicationsClocksSetting",
                  "sw_power_cap": "SwPowerCap", "hw_slowdown": "HwSlowdown", "sync_boost": "SyncBoost",
                  "sw_thermal_slowdown": "SwThermalSlowdown", "hw_thermal_slowdown": "HwThermalSlowdown",
                  "hw_power_brake_slowdown": "HwPowerBrakeSlowdown", "display_clock_setting": "DisplayClockSetting"}
    assert tuple(nvml_names) == enums.CLOCK_EVENT_REASONS
    for reason, bit in enums.CLOCK_EVENT_BITS.items():
        assert getattr(pynvml, f"nvmlClocksEventReason{nvml_names[reason]}") == bit, reason
    assert enums.reason_bits(enums.CLOCK_EVENT_REASONS) == pynvml.nvmlClocksEventReasonAll


def test_named_reason_selections_are_reasons():
    reasons = set(enums.CLOCK_EVENT_REASONS)
    assert set(enums.THERMAL_REASONS) <= set(enums.THROTTLE_REASONS) <= reasons
    assert enums.IDLE_REASON in reasons and enums.IDLE_REASON not in enums.THROTTLE_REASONS
    assert enums.reason_bits(enums.THERMAL_REASONS) == 0x20 | 0x40


def test_port_states_match_the_kernels_sysfs_strings():
    """``state`` reads "4: ACTIVE" in the sysfs trees (the kernel's ib_port_state names, lower-cased)."""
    paths = list(FIXTURES.glob("sysfs/**/class/infiniband/*/ports/*/state"))
    for path in paths:
        value, text = path.read_text().strip().split(": ")
        assert enums.IB_PORT_STATES[int(value)] == text.lower(), path
    assert paths and enums.IB_PORT_STATES[enums.IB_PORT_ACTIVE] == "active"


def test_loss_causes_are_the_stall_causes_and_throttle():
    assert set(enums.LOSS_CAUSES) == set(enums.STALL_CAUSES) | {enums.THROTTLE}
    assert set(enums.STALLS_ALERTED_APART) < set(enums.STALL_CAUSES)


@pytest.mark.parametrize("metric, values", [
    ("lockstep_gpu_clock_event_active", enums.CLOCK_EVENT_REASONS),
    ("lockstep_ib_port_state", enums.IB_PORT_STATES.values()),
    ("lockstep_ib_port_phys_state", enums.IB_PHYS_STATES.values()),
    ("lockstep_job_stalled", enums.STALL_CAUSES),
    ("lockstep_job_lost_gpu_seconds_total", enums.LOSS_CAUSES),
    ("lockstep_gpu_health", enums.GPU_HEALTH_CHECKS + enums.DCGM_HEALTH_SYSTEMS),
    ("lockstep_gpu_xid_errors_total", enums.XID_SEVERITIES + enums.XID_CATEGORIES + enums.XID_ACTIONS),
])
def test_help_documents_every_enum_value(metric, values):
    assert all(value in get(metric).help for value in values)
