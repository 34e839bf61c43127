"""Property-based tests (hypothesis) of every text and JSON parser: on any input they raise nothing
but their own error type, and where a format has items (disks, mounts, Lustre entries, Redfish
readings) a corrupt item loses that item alone. Examples are few (``make test`` stays fast); the
coverage-guided search is ``make fuzz``. Validation-result parsers (``lockstep validate``) are
tested with their own module."""
from __future__ import annotations

import json
import math
import re
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.alerts.quarantine import BadPayload, parse_notification
from lockstep.analytics.scoring.steptimes import parse_csv
from lockstep.exporters.catalog import power as power_catalog
from lockstep.exporters.fabric.ethtool import parse_driver, parse_ethtool_stats
from lockstep.exporters.fabric.ib import parse_counter, parse_rate, parse_state
from lockstep.exporters.fabric.ibdiag import IbDiagError, parse_ibnetdiscover, parse_perfquery
from lockstep.exporters.power import bmc, cdu, pdu, pollreport
from lockstep.exporters.power.redfish import decode
from lockstep.exporters.storage.diskstats import parse_diskstats
from lockstep.exporters.storage.llite import parse_lctl_stats, parse_llite_stats
from lockstep.exporters.storage.mounts import parse_mounts
from lockstep.exporters.storage.mountstats import parse_mountstats
from lockstep.exporters.toolkit.configfile import MAX_EXPANDED_NODES, PREVIEW_CHARS, ConfigError, loads_yaml, preview
from lockstep.exporters.toolkit.sample import Sample
from tests.helpers.corrupt import NOISE, TOKENS, spliced
from tests.helpers.paths import FIXTURES

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROC = FIXTURES / "procfs"
@FAST
@given(st.one_of(spliced(PROC / "diskstats"), NOISE))
def test_diskstats_never_raises(text):
    parse_diskstats(text)


DISK = "   8       0 {name} " + " ".join(["{n}"] * 11) + " 0 0 0 0\n"


@FAST
@given(st.lists(st.from_regex(r"sd[a-z]{1,3}", fullmatch=True), min_size=2, max_size=8, unique=True),
       st.integers(0, 2 ** 64 - 1), st.data())
def test_a_corrupt_disk_line_loses_that_disk_alone(names, n, data):
    victim = data.draw(st.sampled_from(names))
    bad = data.draw(st.sampled_from(["²", "\u0663", "9" * 21, "x", "-1"]))
    text = "".join(DISK.format(name=d, n=bad if d == victim else n) for d in names)
    assert sorted(d.device for d in parse_diskstats(text)) == sorted(set(names) - {victim})


@FAST
@given(st.one_of(spliced(PROC / "fs/lustre/llite/lustrefs-ffff88105db50000/stats"),
                 spliced(FIXTURES / "lustre/lctl-2.14/llite_client.txt"), NOISE))
def test_llite_and_lctl_never_raise(text):
    parse_llite_stats(text)
    parse_lctl_stats(text)


@FAST
@given(st.sampled_from(["open", "close", "getattr", "mkdir"]), st.sampled_from(["²", "\u0663", "9" * 21]))
def test_a_corrupt_llite_entry_loses_that_entry_alone(op, bad):
    text = (PROC / "fs/lustre/llite/lustrefs-ffff88105db50000/stats").read_text()
    whole = dict(parse_llite_stats(text).metadata_ops)
    corrupt = re.sub(rf"^{op}(\s+)\d+", lambda m: f"{op}{m[1]}{bad}", text, flags=re.M)
    assert dict(parse_llite_stats(corrupt).metadata_ops) == {k: v for k, v in whole.items() if k != op}


@FAST
@given(st.one_of(spliced(PROC / "self/mountstats"), spliced(PROC / "self/mounts"), NOISE))
def test_mount_tables_never_raise(text):
    parse_mountstats(text)
    parse_mounts(text)


@FAST
@given(st.one_of(spliced(FIXTURES / "ethtool/node/ens1np0/statistics"), NOISE))
def test_ethtool_stats_raise_only_value_error(text):
    try:
        names, values = parse_ethtool_stats(text, "stats")
    except ValueError as exc:
        assert str(exc).startswith("stats")
    else:
        assert len(names) == len(values) and all(0 <= v < 2 ** 64 for v in values)
    parse_driver(text)


@FAST
@given(st.binary(max_size=64), NOISE)
def test_infiniband_sysfs_attributes_raise_only_value_error(raw, text):
    for parse, arg in ((parse_counter, raw), (parse_state, text), (parse_rate, text)):
        try:
            parse(arg)
        except ValueError:
            pass


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=4), max_leaves=12)
REDFISH_KEYS = st.sampled_from(["Id", "MemberId", "Status", "Reading", "Members", "@odata.id", "PowerWatts",
                                "EnergykWh", "InputPowerWatts", "PowerControl", "PowerSupplies", "Links",
                                "Chassis", "PolyPhasePowerWatts", "CurrentAmps", "Voltage", "PumpSpeedPercent",
                                "LeakDetectorGroups", "Detectors", "DetectorState", "DataSourceUri",
                                "SupplyTemperatureCelsius", "FlowLitersPerMinute", "PowerLimitWatts"])
DOC = st.dictionaries(REDFISH_KEYS, JSON | st.dictionaries(REDFISH_KEYS, JSON, max_size=3), max_size=6)


@FAST
@given(DOC, st.one_of(st.none(), DOC))
def test_redfish_document_parsers_never_raise(doc, other):
    bmc.parse_psu(doc, other)
    bmc.parse_legacy_psus(doc)
    bmc.chassis_power("1", other, bmc.parse_legacy_psus(doc), doc)
    bmc.chassis_links(doc)
    pdu.parse_metrics(other)
    pdu.parse_outlet(doc)
    pdu.parse_circuit(doc)
    cdu.parse_connector(doc, "rack")
    cdu.parse_pump(doc)
    cdu.parse_leak_detection(doc)


@FAST
@given(DOC)
def test_a_wrong_typed_sibling_loses_no_psu_reading(noise):
    good = {"Id": "Bay1", "InputPowerWatts": {"Reading": 374.0}}
    psus = bmc.parse_legacy_psus({"PowerSupplies": [noise, {"MemberId": "0", "PowerInputWatts": 374}]})
    assert psus[-1].input_watts == 374.0
    assert bmc.parse_psu(good, good).input_watts == 374.0


ALERT = st.fixed_dictionaries({"status": st.sampled_from(["firing", "resolved", 3]),
                               "labels": st.dictionaries(st.sampled_from(["alertname", "node", "gpu", "xid"]),
                                                         st.text(max_size=80) | st.integers(), max_size=4)})


@FAST
@given(st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode()),
                 st.lists(ALERT, max_size=4).map(lambda a: json.dumps({"alerts": a}).encode())))
def test_alertmanager_webhook_raises_only_bad_payload(body):
    try:
        for request in parse_notification(body):
            assert "\n" not in request.reason and len(request.reason) < 400
    except BadPayload:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.one_of(TOKENS, st.text(string.printable, max_size=6)), max_size=4), max_size=6))
def test_steptimes_csv_raises_only_config_error(tmp_path, rows):
    path = tmp_path / "steps.csv"
    path.write_text("worker,step,seconds\n" + "".join(",".join(r) + "\n" for r in rows))
    try:
        parse_csv(path)
    except ConfigError:
        pass


# Numbers a BMC may send that are no reading: Python's JSON decoder reads NaN, Infinity, -Infinity and
# 1e999 (as inf), and integers of any size. Finite ones stay small enough here that no arithmetic of
# a parser overflows (that is the poll's last check, pollreport.keep_finite, tested below).
NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, 10 ** 400, -(10 ** 400)])
NUMBER = st.floats(-1e12, 1e12) | st.integers(-10 ** 12, 10 ** 12) | NOT_FINITE
# Every property the parsers read a number from, each a plain number, an excerpt (a reading, a set
# point, a limit, a line of a circuit) or absent; and the arrays of the deprecated Power resource.
READING_KEYS = ["PowerWatts", "EnergykWh", "InputPowerWatts", "PowerLimitWatts", "PowerInputWatts",
                "PowerConsumedWatts", "PowerLimit", "SupplyTemperatureCelsius", "ReturnTemperatureCelsius",
                "FlowLitersPerMinute", "SupplyPressurekPa", "ReturnPressurekPa", "HeatRemovedkW", "PumpSpeedPercent",
                "PolyPhasePowerWatts", "PolyPhaseCurrentAmps", "PolyPhaseVoltage", "CurrentAmps", "Voltage"]
EXCERPT = st.fixed_dictionaries({"Reading": NUMBER, "SetPoint": NUMBER, "LimitInWatts": NUMBER,
                                 "Line1ToNeutral": st.fixed_dictionaries({"Reading": NUMBER})})
READINGS = st.fixed_dictionaries({}, optional={k: NUMBER | EXCERPT for k in READING_KEYS})
READING_DOC = st.tuples(READINGS, st.lists(READINGS, max_size=2), st.lists(READINGS, max_size=2)).map(
    lambda parts: {**parts[0], "PowerControl": parts[1], "PowerSupplies": parts[2]})

def _numbers(found) -> list:
    """Every float of the parsers' results (dataclasses, tuples, lists of them)."""
    if isinstance(found, float):
        return [found]
    if isinstance(found, (list, tuple)):
        return [n for item in found for n in _numbers(item)]
    if hasattr(found, "__dataclass_fields__"):
        return [n for name in found.__dataclass_fields__ for n in _numbers(getattr(found, name))]
    return []


@FAST
@given(READING_DOC, st.one_of(st.none(), READING_DOC))
def test_a_redfish_reading_is_finite_or_absent(doc, other):
    """NaN, ±Infinity and numbers past a float's range never come out of a parser as a reading, and
    each one a parser met is counted for the poll, once however often it is read."""
    with pollreport.collecting() as report:
        psus = bmc.parse_legacy_psus(doc)
        found = [bmc.parse_psu(doc, other), psus, bmc.chassis_power("1", other, psus, doc),
                 bmc.chassis_power("1", other, psus, doc), pdu.parse_metrics(other), pdu.parse_outlet(doc),
                 pdu.parse_circuit(doc), cdu.parse_connector(doc, "rack"), cdu.parse_pump(doc)]
    assert all(math.isfinite(n) for n in _numbers(found)), found
    with pollreport.collecting() as once:
        bmc.chassis_power("1", other, psus, doc)
    with pollreport.collecting() as twice:   # as a fallback order reads a reading to decide, then to use it
        bmc.chassis_power("1", other, psus, doc)
        bmc.chassis_power("1", other, psus, doc)
    assert twice.invalid_readings == once.invalid_readings <= report.invalid_readings


@FAST
@given(st.lists(st.sampled_from(["Line1ToNeutral", "Line2ToNeutral", "Line3ToNeutral"]), min_size=1, unique=True),
       st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]))
def test_a_non_finite_line_of_a_circuit_loses_that_line_alone(bad_lines, token):
    """From the JSON text a PDU sends, through the decoder the exporter uses."""
    lines = {f"Line{i}ToNeutral": {"Reading": 100.0 * i} for i in (1, 2, 3)}
    text = json.dumps({"Id": "A", "PolyPhasePowerWatts": {k: {"Reading": "@" if k in bad_lines else v["Reading"]}
                                                          for k, v in lines.items()}}).replace('"@"', token)
    with pollreport.collecting() as report:
        circuit = pdu.parse_circuit(decode(text.encode()))
    assert dict(circuit.power_watts) == {k: v["Reading"] for k, v in lines.items() if k not in bad_lines}
    assert report.invalid_readings == len(bad_lines)


SAMPLE_VALUES = st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=20)


@FAST
@given(SAMPLE_VALUES)
def test_a_poll_lets_out_only_finite_samples_and_counts_the_rest(values):
    samples = [Sample(power_catalog.CHASSIS_POWER, (str(i),), v) for i, v in enumerate(values)]
    with pollreport.collecting() as report:
        kept = pollreport.keep_finite(samples)
    assert [s.value for s in kept] == [v for v in values if math.isfinite(v)]
    assert report.invalid_readings == len(values) - len(kept)


# YAML a hostile or broken config file may hold: anchors and aliases in any arrangement, merge keys,
# complex keys, tags, scalars Python cannot hold, deep brackets.
YAML_TOKENS = st.sampled_from(["&a ", "&b ", "*a", "*b", "[", "]", "{", "}", ": ", ", ", "- ", "<<: ", "? ", "\n",
                               "  ", "!!binary ", "!!str ", "!!python/name:os.system ", "2020-13-45", "9" * 5000,
                               "0x1f", "lol", "'q'", '"\\x"', "#", "~", "[" * 300, "\x00", "\x1b"])


@FAST
@given(st.lists(YAML_TOKENS, max_size=40).map("".join))
def test_the_yaml_loader_raises_only_config_error(text):
    try:
        value = loads_yaml(text, "c.yaml")
    except ConfigError:
        return
    assert len(preview(value)) <= PREVIEW_CHARS + 3


def _expanded(value) -> int:
    """Nodes of a loaded value with every shared part counted each time it is referenced."""
    if isinstance(value, list):
        return 1 + sum(_expanded(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(1 + _expanded(v) for v in value.values())
    return 1


@FAST
@given(st.integers(1, 10), st.integers(1, 10))
def test_an_alias_bomb_loads_within_the_bound_or_is_refused(levels, fanout):
    """``levels`` anchors, each a list of ``fanout`` aliases of the one before: loaded only when its
    expansion is within MAX_EXPANDED_NODES, refused at start when past it."""
    items = ["- &l0 [" + ", ".join(["lol"] * fanout) + "]"]
    items += [f"- &l{i} [" + ", ".join([f"*l{i - 1}"] * fanout) + "]" for i in range(1, levels)]
    sizes = [1 + fanout]
    for _ in range(1, levels):
        sizes.append(1 + fanout * sizes[-1])
    whole = 1 + 1 + (1 + sum(sizes))   # the mapping, its key, the list of levels
    try:
        value = loads_yaml("v:\n" + "\n".join("  " + item for item in items) + "\n", "c.yaml")
    except ConfigError as exc:
        assert whole > MAX_EXPANDED_NODES and "aliases expand" in str(exc)
    else:
        assert _expanded(value) == whole <= MAX_EXPANDED_NODES


IBD = FIXTURES / "infiniband-diags"


@FAST
@given(st.one_of(spliced(IBD / "treydock/ibnetdiscover/test.out"), spliced(IBD / "treydock/ibnetdiscover/test2.out"),
                 spliced(IBD / "treydock/perfquery/0x7cfe9003009ce5b0.out"), NOISE))
def test_infiniband_diags_parsers_raise_only_their_own_error(text):
    for parse in (parse_ibnetdiscover, parse_perfquery):
        try:
            parse(text)
        except IbDiagError:
            pass


@FAST
@given(st.integers(0, 8), st.sampled_from(["4X", "x", "4x", "²x", "\u0663x"]), st.data())
def test_a_corrupt_ibnetdiscover_line_loses_that_port_alone(victim, width, data):
    lines = (IBD / "treydock/ibnetdiscover/test.out").read_text().splitlines()
    bad = data.draw(st.sampled_from(["0xZZ", "-1", "0x" + "f" * 17]))
    lines[victim] = lines[victim].replace("0x", bad, 1).replace("4x", width, 1)
    fabric = parse_ibnetdiscover("\n".join(lines))
    assert len(fabric.ports) + fabric.unreadable_lines == 9 and fabric.unreadable_lines == 1
