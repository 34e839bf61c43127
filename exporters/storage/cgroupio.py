"""A cgroup v2 group's I/O: ``io.stat`` (bytes and operations per block device) and ``io.pressure`` (pressure
stall information). Formats: the kernel's Documentation/admin-guide/cgroup-v2.rst ("IO Interface Files",
nested-keyed, lines keyed by ``$MAJ:$MIN``, not ordered) and Documentation/accounting/psi.rst."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.numbers import uint


class CgroupFormatError(ValueError):
    """A pressure file that is not PSI at all (no ``some`` line)."""


@dataclass(frozen=True, slots=True)
class DeviceIo:
    device: str              # "MAJ:MIN" as the kernel keys the line
    read_bytes: int
    write_bytes: int
    reads: int
    writes: int
    discard_bytes: int | None  # dbytes/dios: kernels since 5.0 print them; absent on older ones
    discards: int | None


@dataclass(frozen=True, slots=True)
class Pressure:
    some_seconds: float          # total time at least one task was stalled on I/O
    full_seconds: float | None   # total time every non-idle task was; psi.rst: the cpu file may lack it


_REQUIRED = ("rbytes", "wbytes", "rios", "wios")


def _device(token: str) -> bool:
    major, sep, minor = token.partition(":")
    return bool(sep) and major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()


def parse_io_stat(text: str, errors: list[str] | None = None) -> list[DeviceIo]:
    """Every device line of ``io.stat``. Keys the kernel may add later (``cost.*`` of the iocost controller,
    latency keys of io.latency) are ignored; a line with a corrupt or missing counter loses that device
    alone (named in ``errors``)."""
    out: list[DeviceIo] = []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not _device(fields[0]):
            if errors is not None:
                errors.append(f"{fields[0][:24]!r}: not a MAJ:MIN device")
            continue
        try:
            values = {}
            for field in fields[1:]:
                key, sep, value = field.partition("=")
                if sep and key in ("rbytes", "wbytes", "rios", "wios", "dbytes", "dios"):
                    values[key] = uint(value)
            missing = [key for key in _REQUIRED if key not in values]
            if missing:
                raise ValueError(f"no {', '.join(missing)}")
        except ValueError as exc:
            if errors is not None:
                errors.append(f"{fields[0]}: {exc}")
            continue
        out.append(DeviceIo(fields[0], values["rbytes"], values["wbytes"], values["rios"], values["wios"],
                            values.get("dbytes"), values.get("dios")))
    return out


def parse_pressure(text: str) -> Pressure:
    """``io.pressure`` (or ``/proc/pressure/io``): ``some|full avg10=.. avg60=.. avg300=.. total=<µs>``.
    Only the totals are kept: the averages are the kernel's own rates of them, which ``rate()`` recomputes
    over any window."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in ("some", "full"):
            continue
        for field in fields[1:]:
            key, _, value = field.partition("=")
            if key == "total":
                try:
                    totals[fields[0]] = uint(value) / 1e6  # psi.rst: total is in microseconds
                except ValueError as exc:
                    raise CgroupFormatError(f"{fields[0]} line: {exc}") from None
    if "some" not in totals:
        raise CgroupFormatError("no 'some ... total=' line")
    return Pressure(totals["some"], totals.get("full"))
