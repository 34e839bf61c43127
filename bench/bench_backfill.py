"""``lockstep sim backfill``: what filling a real Prometheus with a simulated cluster costs.

Half an hour of 1,024 and of 16,384 GPUs at 5 s (what the analytics read, and at 1,024 GPUs every
series), and a month of 128 GPUs at 5 minutes (what the report and the dashboards read): wall time,
CPU and peak memory of the command and of promtool, samples per second, the blocks' size on disk.
The peer is promtool itself, measured in the same run: the command's wall time against promtool's
CPU time (1.0 would mean the pipeline costs nothing beyond promtool's own parsing; the model and
the line building run on the other core meanwhile).
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_sim import BENCH_YAML

CASES = [  # (label, nodes, days, step, metrics)
    ("1,024 GPUs x 30 min, every series", 128, 30 / 1440, 5, "all"),
    ("1,024 GPUs x 30 min, analytics", 128, 30 / 1440, 5, "analytics"),
    ("16,384 GPUs x 30 min, analytics", 2048, 30 / 1440, 5, "analytics"),
    ("128 GPUs x 30 days at 5 min, report and dashboards", 16, 30, 300, "report,dashboards"),
]
_NUMBERS = re.compile(r"wrote ([\d,]+) samples of ([\d,]+) series.*\((\d+) promtool run.*\n.*peak memory (\d+) MB "
                      r"here, (\d+) MB promtool; CPU ([\d.]+) s here, ([\d.]+) s promtool")


def run(root: Path, label: str, nodes: int, days: float, step: float, metrics: str) -> None:
    scenario = root / f"bench-{nodes}.yaml"
    scenario.write_text(BENCH_YAML.format(nodes=nodes))
    out = root / f"data-{nodes}-{metrics}"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "backfill", str(scenario), "--days", str(days),
                           "--step", str(step), "--metrics", metrics, "--out", str(out)], capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        print(f"{label}: failed: {proc.stderr[-1000:]}")
        return
    samples, series, runs, rss, prss, cpu, pcpu = _NUMBERS.search(proc.stdout).groups()
    samples = int(samples.replace(",", ""))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
    print(f"{label}: {samples:,} samples of {series} series in {wall:.1f} s ({samples / wall / 1e3:.0f}k samples/s), "
          f"{runs} promtool runs, blocks {size:.0f} MB ({size * 2**20 / samples:.2f} B/sample)")
    print(f"  peak RSS {rss} MB command, {prss} MB promtool; CPU {cpu} s command, {pcpu} s promtool")
    print(f"  peer: promtool's own CPU {pcpu} s; wall / promtool CPU = {wall / float(pcpu):.2f}")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            run(Path(tmp), *case)
            for data in Path(tmp).glob("data-*"):
                subprocess.run(["rm", "-rf", str(data)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
