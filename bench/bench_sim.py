"""Simulator budgets: live 64 nodes x 8 GPUs at a 5 s period under 20% of one core;
``sim series`` for 1,024 GPUs x 1 h at 5 s in under 60 s. Each figure comes with a peer measured in
the same run: the live tick against writing the same number of files with a plain loop, the real
``lockstep sim run`` process against the in-process tick, the series against reading its output back.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from lockstep.exporters.toolkit.configfile import loads_yaml
from lockstep.simulator.live import TreeSink
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import parse_scenario
from lockstep.simulator.series import write_series

PERIOD = 5.0
TICKS = 8


BENCH_YAML = """
name: bench-{nodes}
seed: 3
duration_s: 3600
sample_period_s: 5
cluster: {{nodes: {nodes}, gpus_per_node: 8, nodes_per_rack: 4}}
job: {{job_id: "1", nodes: {nodes}, step_time_s: 1.5, checkpoint: {{every_s: 600, blocking_s: 45, write_bytes: 2.0e+12}}}}
faults:
  - {{kind: gpu_throttle, node: node05, gpu: 3, start_s: 0, end_s: 3600, clock_factor: 0.7}}
  - {{kind: pause_storm, node: node02, nic: 1, start_s: 10, end_s: 60}}
"""


def scenario(nodes: int):
    return parse_scenario(loads_yaml(BENCH_YAML.format(nodes=nodes)), "<bench>")


def live_tick_cpu(root: Path) -> tuple[float, int]:
    """CPU seconds per tick (model + every node's trees) and files written per tick."""
    sc = scenario(64)
    model = Model(sc)
    sink = TreeSink(model.topo, root, sc.job.job_id)
    states = model.states()
    sink.write(next(states))  # creates the trees; not part of the steady state
    before_cpu, before_writes = time.process_time(), sink.writer.writes
    for _ in range(TICKS):
        sink.write(next(states))
    return (time.process_time() - before_cpu) / TICKS, (sink.writer.writes - before_writes) // TICKS


def plain_loop_cpu(root: Path, files: int) -> float:
    """Peer: open/write/close the same number of small files, nothing else."""
    paths = [str(root / f"f{i}") for i in range(files)]
    for p in paths:
        Path(p).write_bytes(b"0\n")
    start = time.process_time()
    for _ in range(TICKS):
        for i, p in enumerate(paths):
            fd = os.open(p, os.O_WRONLY)
            os.pwrite(fd, b"%d\n" % (i * 1000003), 0)
            os.close(fd)
    return (time.process_time() - start) / TICKS


def process_cpu_fraction(root: Path, speed: float = 5.0, wall: float = 20.0) -> float:
    """The real ``lockstep sim run`` (64 x 8) at ``speed``: CPU per simulated tick (ticks counted from
    gpus.json timestamps, so a process that falls behind is not flattered), as a fraction at 1x."""
    path = root / "bench.yaml"
    path.write_text(BENCH_YAML.format(nodes=64))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from lockstep.cli import main; sys.exit(main())",
                             "sim", "run", str(path), "--root", str(root / "live"), "--speed", str(speed),
                             "--duration", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    def stamp():
        return json.loads((root / "live" / "node63" / "gpus.json").read_text())["timestamp"]
    try:
        for _ in range(5):
            proc.stdout.readline()  # banner: trees created, service up
        time.sleep(2 * PERIOD / speed)
        cpu0, ts0 = _cpu(proc.pid), stamp()
        time.sleep(wall)
        ticks = (stamp() - ts0) / PERIOD
        return (_cpu(proc.pid) - cpu0) / ticks / PERIOD
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def series_seconds(root: Path) -> tuple[float, float, int]:
    sc = scenario(128)
    start = time.monotonic()
    out, _, rows = write_series(sc, root / "s.parquet")
    took = time.monotonic() - start
    start = time.monotonic()
    pq.read_table(out)
    return took, time.monotonic() - start, rows


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tick, files = live_tick_cpu(root / "trees")
        (root / "peer").mkdir()
        peer = plain_loop_cpu(root / "peer", files)
        print(f"live 64x8: {tick * 1000:.0f} ms CPU per tick, {files} files rewritten per tick; "
              f"{tick / PERIOD:.1%} of one core at a {PERIOD:g} s period (budget 20%)")
        print(f"  peer: the same {files} small writes in a plain loop: {peer * 1000:.0f} ms; ratio {tick / peer:.2f}x")
        frac = process_cpu_fraction(root)
        print(f"  real `lockstep sim run` process (run at 5x, CPU per tick over the period): {frac:.1%} of one core; "
              f"ratio to the in-process tick {frac / (tick / PERIOD):.2f}x")
        took, read, rows = series_seconds(root)
        print(f"series 1,024 GPUs x 1 h at 5 s: {took:.1f} s wall for {rows:,} rows (budget 60 s)")
        print(f"  peer: reading the Parquet back: {read:.1f} s; ratio {took / read:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
