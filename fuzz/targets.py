"""One fuzz target per text parser: bytes in, the parser's own error type allowed out. Anything else
escaping is a crash (``make fuzz`` keeps it under tests/fuzz_regressions/<target>/, and
tests/test_fuzz_regressions.py replays every kept case on each ``make test``)."""
from __future__ import annotations

import json
from typing import Callable

from alerts.quarantine import BadPayload, parse_notification
from exporters.fabric.ethtool import parse_driver, parse_ethtool_stats
from exporters.fabric.ib import parse_counter, parse_rate, parse_state
from exporters.power import bmc, cdu, pdu
from exporters.power.redfish import RedfishError, decode
from exporters.storage.diskstats import parse_diskstats
from exporters.storage.llite import parse_lctl_stats, parse_llite_stats
from exporters.storage.mounts import parse_mounts
from exporters.storage.mountstats import parse_mountstats
from validation.model import ParseError
from validation.parsers import parse as parse_validation


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
    bmc.chassis_power("1", doc, links, doc)
    bmc.parse_psu(doc, doc)
    bmc.chassis_links(doc)
    pdu.parse_outlet(doc)
    pdu.parse_circuit(doc)
    pdu.parse_metrics(doc)
    cdu.parse_connector(doc, "rack")
    cdu.parse_pump(doc)
    cdu.parse_leak_detection(doc)


def _webhook(data: bytes) -> None:
    try:
        for request in parse_notification(data):
            json.dumps(request.reason)
    except BadPayload:
        pass


def _validation(kind: str) -> Callable[[bytes], None]:
    """A table of a validation tool (``lockstep validate``), as its text and as lines read from a file."""
    def target(data: bytes) -> None:
        import io

        from validation.lines import Lines
        from validation.parsers import LINE_PARSERS, MAX_BYTES
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
    "nccl": _validation("nccl"),
    "perftest": _validation("perftest"),
    "gpu-burn": _validation("gpu-burn"),
}
