"""A stand-in for ``ibnetdiscover`` and ``perfquery`` that prints recorded outputs from a folder:
``python fake_ibdiag.py ibnetdiscover DIR`` prints ``DIR/ibnetdiscover.out``; ``python fake_ibdiag.py
perfquery DIR ... -G GUID PORTS`` prints ``DIR/perfquery/GUID.out``. On demand a node hangs (a file
``DIR/hang/GUID``) or fails as perfquery does when the MAD goes unanswered (``DIR/fail/GUID``: its
content goes to stderr, exit 255). ``DIR/no-ib`` makes every call answer like infiniband-diags on a host
without an InfiniBand port (tests/fixtures/infiniband-diags/local/)."""
from __future__ import annotations

import sys
import threading
from pathlib import Path


def main(argv: list[str]) -> int:
    tool, folder, rest = argv[0], Path(argv[1]), argv[2:]
    if (folder / "no-ib").exists():
        local = Path(__file__).resolve().parent.parent / "fixtures/infiniband-diags/local"
        sys.stdout.write((local / f"{tool}-no-ib.stdout").read_text())
        sys.stderr.write((local / f"{tool}-no-ib.stderr").read_text())
        return int((local / f"{tool}-no-ib.rc").read_text())
    if tool == "ibnetdiscover":
        sys.stdout.write((folder / "ibnetdiscover.out").read_text())
        return 0
    guid = rest[rest.index("-G") + 1]
    if (folder / "hang" / guid).exists():
        threading.Event().wait()   # hangs until killed, as perfquery does on a wedged switch
    if (folder / "fail" / guid).exists():
        sys.stderr.write((folder / "fail" / guid).read_text())
        return 255
    sys.stdout.write((folder / "perfquery" / f"{guid}.out").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
