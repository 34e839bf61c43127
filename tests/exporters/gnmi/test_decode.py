"""Both path sets' recorded updates (tests/fixtures/gnmi/) decode to the right samples; bad updates are named
and dropped, the rest kept. Expected values are read off the fixtures by hand (README there)."""
from __future__ import annotations

import json

import pytest

from lockstep.exporters.gnmi.decode import decode
from lockstep.exporters.third_party.gnmi import gnmi_pb2
from lockstep.exporters.toolkit.gnmipath import parse_path
from lockstep.simulator.gnmi import load_recording
from tests.helpers.paths import FIXTURES


def notification(name: str) -> gnmi_pb2.Notification:
    recording = load_recording(json.loads((FIXTURES / "gnmi" / f"{name}.json").read_text()))
    prefix = gnmi_pb2.Path(target=recording.prefix_target) if recording.prefix_target else None
    return gnmi_pb2.Notification(prefix=prefix, update=recording.updates)


def values(decoded) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in decoded.samples}


def test_sonic_counters_db_paths() -> None:
    got = values(decode("sonic", "leaf1", notification("sonic")))
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "7", "rx"))] == 2
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "3", "rx"))] == 1500
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "3", "tx"))] == 40
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "0", "tx"))] == 0
    assert got[("lockstep_switch_pfc_pause_duration_seconds_total", ("leaf1", "Ethernet68", "3", "rx"))] == 0.25
    assert got[("lockstep_switch_queue_ecn_marked_packets_total", ("leaf1", "Ethernet68", "3"))] == 321
    assert got[("lockstep_switch_queue_dropped_packets_total", ("leaf1", "Ethernet68", "3", "any"))] == 7
    assert got[("lockstep_switch_queue_watermark_bytes", ("leaf1", "Ethernet68", "1"))] == 64
    assert got[("lockstep_switch_queue_watermark_bytes", ("leaf1", "Ethernet68", "3"))] == 1048576
    assert got[("lockstep_switch_pfc_watchdog_stormed", ("leaf1", "Ethernet68", "3"))] == 1
    assert got[("lockstep_switch_pfc_watchdog_stormed", ("leaf1", "Ethernet68", "4"))] == 0
    assert got[("lockstep_switch_pfc_watchdog_storms_total", ("leaf1", "Ethernet68", "3", "detected"))] == 1
    assert got[("lockstep_switch_pfc_watchdog_dropped_packets_total", ("leaf1", "Ethernet68", "3", "tx"))] == 900
    assert got[("lockstep_switch_pfc_watchdog_dropped_packets_total", ("leaf1", "Ethernet68", "3", "rx"))] == 12
    # 8 priorities x rx/tx frames, one duration; queues 1, 3, 4 (not the periodic key); watchdog of queues 3, 4
    assert sum(1 for k in got if k[0] == "lockstep_switch_pfc_pause_frames_total") == 16
    assert not any(k[1][2] == "1:periodic" for k in got if len(k[1]) > 2)


def test_cumulus_openconfig_paths() -> None:
    decoded = decode("cumulus", "leaf2", notification("cumulus"))
    assert decoded.errors == []
    got = values(decoded)
    assert got == {
        ("lockstep_switch_pfc_pause_frames_total", ("leaf2", "swp1", "3", "rx")): 1200,
        ("lockstep_switch_pfc_pause_frames_total", ("leaf2", "swp1", "3", "tx")): 35,
        ("lockstep_switch_pfc_pause_duration_seconds_total", ("leaf2", "swp1", "3", "rx")): 0.48,
        ("lockstep_switch_pfc_pause_duration_seconds_total", ("leaf2", "swp1", "3", "tx")): 0.009,
        ("lockstep_switch_queue_ecn_marked_packets_total", ("leaf2", "swp1", "3")): 4410,
        ("lockstep_switch_queue_dropped_packets_total", ("leaf2", "swp1", "3", "wred")): 2,
        ("lockstep_switch_queue_dropped_packets_total", ("leaf2", "swp1", "3", "no_buffer")): 5,
        ("lockstep_switch_queue_watermark_bytes", ("leaf2", "swp1", "3")): 524288,
        ("lockstep_switch_pfc_pause_frames_total", ("leaf2", "swp2", "4", "rx")): 0,
    }


@pytest.mark.parametrize(("path_set", "path", "val", "error"), [
    ("sonic", "COUNTERS/Ethernet*", gnmi_pb2.TypedValue(json_ietf_val=b"[1]"), "expected a JSON object"),
    ("sonic", "COUNTERS/Ethernet*", gnmi_pb2.TypedValue(json_ietf_val=b"{not json"), "Expecting property name"),
    ("sonic", "COUNTERS/Ethernet*", gnmi_pb2.TypedValue(uint_val=3), "expected a JSON value, got uint_val"),
    ("sonic", "", gnmi_pb2.TypedValue(json_ietf_val=b'{"SAI_PORT_STAT_PFC_3_RX_PKTS": "5"}'), "no port in the path"),
    ("sonic", "COUNTERS/Ethernet*/Pfcwd", gnmi_pb2.TypedValue(json_ietf_val=b'{"Ethernet0:3": {"PFC_WD_STATUS": "odd"}}'),
     "neither operational nor stormed"),
    ("sonic", "COUNTERS/Ethernet*", gnmi_pb2.TypedValue(json_ietf_val=b'{"Ethernet0": {"SAI_PORT_STAT_PFC_3_RX_PKTS": "x"}}'),
     "invalid literal"),
    ("cumulus", "/qos/interfaces/interface[interface-id=swp1]/output/queues/queue[name=3]/state/ecn-marked-pkts",
     gnmi_pb2.TypedValue(string_val="many"), "expected an integer value, got string_val"),
    ("cumulus", "/qos/interfaces/interface[interface-id=swp1]/state/whatever", gnmi_pb2.TypedValue(uint_val=1),
     "not in the cumulus path set"),
    ("cumulus", "/qos/interfaces/interface/output/queues/queue[name=3]/state/ecn-marked-pkts",
     gnmi_pb2.TypedValue(uint_val=1), "no interface[interface-id] key"),
])
def test_a_bad_update_is_named_and_the_good_ones_kept(path_set, path, val, error) -> None:
    good = notification(path_set)
    bad = gnmi_pb2.Update(path=parse_path(path), val=val)
    mixed = gnmi_pb2.Notification(prefix=good.prefix, update=[bad, *good.update])
    decoded = decode(path_set, "sw", mixed)
    assert len(decoded.errors) == 1 and error in decoded.errors[0], decoded.errors
    assert values(decoded) == values(decode(path_set, "sw", good))
