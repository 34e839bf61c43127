"""IBM Spectrum Scale (GPFS) client statistics: ``mmpmon -p`` answers to the ``fs_io_s`` request, one line per
mounted file system of ``_keyword_ value`` pairs (IBM Storage Scale documentation, "Display I/O statistics per
mounted file system"; tests/fixtures/spectrum-scale/README.md has the keywords)."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.numbers import uint

_COUNTERS = ("_br_", "_bw_", "_oc_", "_cc_", "_rdc_", "_wc_", "_dir_", "_iu_")


@dataclass(frozen=True, slots=True)
class FsIo:
    cluster: str
    fsname: str
    read_bytes: int
    write_bytes: int
    opens: int
    closes: int
    reads: int
    writes: int
    readdirs: int
    inode_updates: int


def parse_fs_io_s(text: str, errors: list[str] | None = None) -> list[FsIo]:
    """Every ``_fs_io_s_`` line; other lines (another request's answers, prompts) are ignored. A line with a
    non-zero ``_rc_``, a missing keyword or a corrupt counter loses that file system alone (named in ``errors``)."""
    out = []
    for line in text.splitlines():
        tokens = line.split()
        if not tokens or tokens[0] != "_fs_io_s_":
            continue
        fields = dict(zip(tokens[1::2], tokens[2::2]))
        name = fields.get("_fs_", "?")[:40]
        try:
            if fields.get("_rc_") != "0":
                raise ValueError(f"mmpmon status _rc_ {fields.get('_rc_', 'missing')}")
            if "_fs_" not in fields or "_cl_" not in fields:
                raise ValueError("no _fs_ or _cl_")
            missing = [key for key in _COUNTERS if key not in fields]
            if missing:
                raise ValueError(f"no {' '.join(missing)}")
            values = [uint(fields[key]) for key in _COUNTERS]
        except ValueError as exc:
            if errors is not None:
                errors.append(f"{name}: {exc}")
            continue
        out.append(FsIo(fields["_cl_"], fields["_fs_"], *values))
    return out
