"""`make bench`: run every bench/bench_*.py script (each prints its own figures and ratios)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    selected = sys.argv[1:]
    scripts = sorted(Path(__file__).parent.glob("bench_*.py"))
    failed = 0
    for script in scripts:
        if selected and not any(name in script.stem for name in selected):
            continue
        print(f"=== {script.stem} ===", flush=True)
        failed |= subprocess.call([sys.executable, str(script)]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
