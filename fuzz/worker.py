"""One atheris run of one target (a process of its own: libFuzzer owns the process it runs in)."""
from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from fuzz.targets import TARGETS


def main() -> None:
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
