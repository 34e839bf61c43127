"""perftest (linux-rdma/perftest: ``ib_write_bw``, ``ib_send_bw``, ``ib_read_bw``, ``*_lat``): the stdout of
one run, result formats as in ``src/perftest_parameters.h`` (RESULT_FMT*, REPORT_FMT*).

Handled: bandwidth tables in MB/sec or Gb/sec (``--report_gbits``), with the ``#sl`` (QoS) column, the
per-port columns and ``CPU_Util``; latency tables in usec, and the ``--duration`` latency table. A
loopback run prints the server's and the client's reports interleaved: a message size reported twice
keeps the lower bandwidth. Latency in cycles (``--report-cycles``) cannot be converted without the CPU
clock and is refused, like any other table layout.
"""
from __future__ import annotations

import re

from lockstep.validation.lines import Lines, scaled, to_float
from lockstep.validation.model import Figure, Parsed, ParseError
from lockstep.validation.sizetable import SizeTable

# perftest's MB is 2**20 bytes (format_factor 0x100000): in ib_loopback_8M_size.log, 24056.72 MB/s over
# 8388608-byte messages is 3007 messages/s only with MB = 2**20, as its MsgRate column says (0.003007 Mpps).
MIB = 1 << 20
GBIT = 1e9 / 8
_BW = re.compile(r"#bytes (?P<sl>#sl )?#iterations BW peak\[(?P<unit>MB|Gb)/sec\] BW average\[(?P=unit)/sec\] "
                 r"MsgRate\[Mpps\](?P<ports>( BW Port[12]\[(?P=unit)/sec\] MsgRate Port[12]\[Mpps\]){2})?"
                 r"(?P<cpu> CPU_Util\[%\])?")
_LAT = re.compile(r"#bytes #iterations t_min\[(?P<unit>usec|cycles)\] t_max\[(?P=unit)\] t_typical\[(?P=unit)\] "
                  r"t_avg\[(?P=unit)\] t_stdev\[(?P=unit)\] 99% percentile\[(?P=unit)\] 99\.9% percentile\[(?P=unit)\]"
                  r"(?P<cpu> CPU_Util\[%\])?")
_LAT_DUR = re.compile(r"#bytes #iterations t_avg\[usec\] tps average(?P<cpu> CPU_Util\[%\])?")
_TITLE = re.compile(r"^\s*(RDMA_Write|RDMA_Read|Send|Atomic \S+) (BW|Latency) Test\s*$")
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_PROGRAM = {"RDMA_Write": "ib_write", "RDMA_Read": "ib_read", "Send": "ib_send"}
_LAT_COLUMNS = ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "t_p99", "t_p99_9")


def _layout(header: str) -> tuple[str, int, dict] | None:
    """(kind, fields per row, match groups) of a result header, or None if perftest prints no such table."""
    text = " ".join(header.split())
    if (m := _BW.fullmatch(text)):
        return "bw", 5 + bool(m["sl"]) + (4 if m["ports"] else 0) + bool(m["cpu"]), m.groupdict()
    if (m := _LAT.fullmatch(text)):
        return "lat", 9 + bool(m["cpu"]), m.groupdict()
    if (m := _LAT_DUR.fullmatch(text)):
        return "lat_dur", 4 + bool(m["cpu"]), m.groupdict()
    return None


def _bw_row(tokens: list[str], groups: dict) -> dict:
    factor = MIB if groups["unit"] == "MB" else GBIT
    first = 2 + bool(groups["sl"])
    peak, average, rate = to_float(tokens[first]), to_float(tokens[first + 1]), scaled(tokens[first + 2], 6)
    if peak is None or average is None or rate is None:
        raise ValueError("bandwidth and message rate must be numbers")
    return {"size_bytes": int(tokens[0]), "iterations": int(tokens[first - 1]), "bw_peak_bytes_per_second":
            peak * factor, "bw_average_bytes_per_second": average * factor, "msg_rate_per_second": rate}


def _lat_row(tokens: list[str], kind: str) -> dict:
    names = _LAT_COLUMNS if kind == "lat" else ("t_avg",)
    values = [scaled(t, -6) for t in tokens[2:2 + len(names)]]
    if None in values:
        raise ValueError("latencies must be numbers")
    row = {"size_bytes": int(tokens[0]), "iterations": int(tokens[1])}
    row.update({f"{name}_seconds": value for name, value in zip(names, values)})
    if kind == "lat_dur":
        row["tps_per_second"] = to_float(tokens[3])
    return row


def _replaces(row: dict, old: dict) -> bool:
    """Server and client both report a size: keep the report with the lower bandwidth (latency: the first)."""
    return row.get("bw_average_bytes_per_second", float("inf")) < old.get("bw_average_bytes_per_second", float("inf"))


def _scan(lines: Lines) -> tuple[str, str, str, dict, SizeTable]:
    title = device = ""
    layout, rows = None, SizeTable(_replaces)
    for number, line in lines:
        tokens = line.split()
        if (m := _TITLE.match(line)):
            title = f"{m[1]} {m[2]}"
        elif (m := _DEVICE.search(line)) and not device:
            device = m[1]
        elif tokens and tokens[0] == "#bytes":
            found = _layout(line)
            if found is None:
                raise lines.fail(number, f"unknown perftest result layout: {' '.join(tokens)!r}")
            if found[2].get("unit") == "cycles":
                raise lines.fail(number, "latency in cycles (--report-cycles): rerun without it")
            layout = found
        elif layout is not None and tokens and tokens[0].isdigit():
            if len(tokens) != layout[1]:
                raise lines.fail(number, f"{len(tokens)} fields where the header has {layout[1]}: "
                                         f"{line.strip()!r} (truncated?)")
            try:
                rows.add(_bw_row(tokens, layout[2]) if layout[0] == "bw" else _lat_row(tokens, layout[0]))
            except ValueError as exc:
                raise lines.fail(number, f"malformed result row ({exc}): {line.strip()!r}") from None
    end = lines.finish()
    if layout is None or not rows.count:
        raise ParseError(lines.source, end, "no perftest result rows (not perftest output, or truncated)")
    return title, device, layout[0], layout[2], rows


def _program(title: str) -> str:
    if not title:
        return ""
    verb, test = title.rsplit(" ", 1)
    base = _PROGRAM.get(verb, "ib_atomic")
    return f"{base}_{'bw' if test == 'BW' else 'lat'}"


def parse_perftest(text: str, source: str = "<perftest output>") -> Parsed:
    """Rows per message size; headline figures from the largest size. Test: ``<program>/<device>``."""
    return parse_perftest_lines(Lines.of_text(text, source))


def parse_perftest_lines(lines: Lines) -> Parsed:
    """``parse_perftest`` of an output read line by line: its memory does not grow with the table."""
    title, device, _, _, rows = _scan(lines)
    ordered = sorted(rows.rows(), key=lambda row: row["size_bytes"])
    figures = _headline(ordered[-1])
    program = _program(title)
    test = f"{program}/{device}" if program and device else program
    return Parsed("perftest", tuple(figures), (), (), test, "",
                  {"rows": ordered, "device": device, "title": title, **rows.summary()})


def _headline(row: dict) -> list[Figure]:
    units = ("bytes_per_second", "per_second", "seconds")
    out = []
    for key, value in row.items():
        for unit in units:
            if key.endswith("_" + unit) and value is not None:
                out.append(Figure(key[: -len(unit) - 1], unit, value))
                break
    return out
