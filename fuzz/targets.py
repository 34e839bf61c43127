"""One fuzz target per text parser: bytes in, the parser's own error type allowed out. Anything else
escaping is a crash (``make fuzz`` keeps it under tests/fuzz_regressions/<target>/, and
tests/fuzz/test_regressions.py replays every kept case on each ``make test``)."""
from __future__ import annotations

import json
import math
from typing import Callable

from lockstep.alerts.quarantine import BadPayload, parse_notification
from lockstep.exporters.fabric.ethtool import parse_driver, parse_ethtool_stats
from lockstep.exporters.fabric.ib import parse_counter, parse_rate, parse_state
from lockstep.exporters.power import bmc, cdu, pdu
from lockstep.exporters.power.redfish import RedfishError, decode
from lockstep.exporters.storage.diskstats import parse_diskstats
from lockstep.exporters.storage.llite import parse_lctl_stats, parse_llite_stats
from lockstep.exporters.storage.mounts import parse_mounts
from lockstep.exporters.storage.mountstats import parse_mountstats
from lockstep.exporters.toolkit.configfile import PREVIEW_CHARS, ConfigError, loads_yaml, preview
from lockstep.validation.model import ParseError
from lockstep.validation.parsers import parse as parse_validation


def _text(data: bytes) -> str:
    return data.decode(errors="replace")  # as exporters.readfile.read_text hands files to parsers


def _ethtool(data: bytes) -> None:
    try:
        parse_ethtool_stats(_text(data), "fuzz")
    except ValueError:
        pass
    parse_driver(_text(data))


def _ib(data: bytes) -> None:
    for parse, arg in ((parse_counter, data), (parse_state, _text(data)), (parse_rate, _text(data))):
        try:
            parse(arg)
        except ValueError:
            pass


def _redfish(data: bytes) -> None:
    try:
        doc = decode(data)
    except RedfishError:
        return
    links = bmc.parse_legacy_psus(doc)
    chassis = bmc.chassis_power("1", doc, links, doc)
    psu = bmc.parse_psu(doc, doc)
    bmc.chassis_links(doc)
    outlet = pdu.parse_outlet(doc)
    circuit = pdu.parse_circuit(doc)
    pdu.parse_metrics(doc)
    loop = cdu.parse_connector(doc, "rack")
    cdu.parse_pump(doc)
    cdu.parse_leak_detection(doc)
    # A reading read as it is sent (NaN, Infinity, 1e999 in the JSON) is finite or absent; a scaled or
    # summed one may overflow, and the poll's last check (pollreport.keep_finite) drops it.
    read = [chassis.limit_watts, psu.input_watts, outlet.power_watts, loop.supply_celsius, loop.return_celsius,
            *(p.input_watts for p in links), *(v for lines in (circuit.power_watts, circuit.current_amperes,
                                                               circuit.voltage_volts) for _, v in lines)]
    assert all(math.isfinite(v) for v in read if v is not None), read


def _webhook(data: bytes) -> None:
    try:
        for request in parse_notification(data):
            json.dumps(request.reason)
    except BadPayload:
        pass


def _yaml(data: bytes) -> None:
    try:
        value = loads_yaml(_text(data), "fuzz.yaml")
    except ConfigError:
        return
    assert len(preview(value)) <= PREVIEW_CHARS + 3


def _validation(kind: str) -> Callable[[bytes], None]:
    """A table of a validation tool (``lockstep validate``), as its text and as lines read from a file."""
    def target(data: bytes) -> None:
        import io

        from lockstep.validation.lines import Lines
        from lockstep.validation.parsers import LINE_PARSERS, MAX_BYTES
        for parse in (lambda: parse_validation(kind, _text(data), "fuzz"),
                      lambda: LINE_PARSERS[kind](Lines.of_file(io.BytesIO(data), "fuzz", MAX_BYTES))):
            try:
                parse()
            except ParseError:
                pass
    return target


TARGETS: dict[str, Callable[[bytes], None]] = {
    "diskstats": lambda data: parse_diskstats(_text(data)) and None,
    "llite": lambda data: (parse_llite_stats(_text(data)), parse_lctl_stats(_text(data))) and None,
    "mountstats": lambda data: (parse_mountstats(_text(data)), parse_mounts(_text(data))) and None,
    "ethtool": _ethtool,
    "infiniband": _ib,
    "redfish": _redfish,
    "webhook": _webhook,
    "yaml": _yaml,
    "nccl": _validation("nccl"),
    "perftest": _validation("perftest"),
    "gpu-burn": _validation("gpu-burn"),
}
