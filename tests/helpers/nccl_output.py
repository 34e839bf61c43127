"""nccl-tests output of any length, in the 2.18 layout of tests/fixtures/validation/
nccl_v2.18_two_nodes.constructed.log (nccl-tests' printf widths, no timestamp column): what
``all_reduce_perf -b 1K -e 256M -i 1K`` prints, a row per KiB from 1 KiB to 256 MiB (262,144 rows),
with invented, self-consistent figures. Written a row at a time."""
from __future__ import annotations

from pathlib import Path
from typing import TextIO

HEAD = ("# nccl-tests version 2.18.2 nccl-headers=23007 nccl-library=23007\n"
        "# Collective test starting: all_reduce_perf\n"
        "# nThread 1 nGpus 1 minBytes {first} maxBytes {last} step: {step}(bytes) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
RANK = "#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10s} device {d:2d} [0000:{bus:02x}:00] NVIDIA H100 80GB HBM3\n"
COLUMNS = ("#\n#                                                              out-of-place                       in-place\n"
           "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
           "busbw  #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
           "(us)  (GB/s)  (GB/s)\n")
FOOT = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:.3f} \n#\n# Collective test concluded: all_reduce_perf\n#\n"


def write(out: TextIO, rows: int, step: int = 1024, hosts: tuple[str, ...] = ("gpu-a01",)) -> tuple[float, float]:
    """Write the output of ``rows`` sizes ``step``, 2 x ``step``, ...; the largest bus bandwidth printed and
    the average printed in the footer (GB/s)."""
    out.write(HEAD.format(first=step, last=rows * step, step=step))
    for r in range(8 * len(hosts)):
        out.write(RANK.format(r=r, pid=15000 + r, host=hosts[r // 8], d=r % 8, bus=0x18 + 0x10 * (r % 8)))
    out.write(COLUMNS)
    peak = 0.0
    for i in range(1, rows + 1):
        size = i * step
        time_us = 10.0 + size / 190_000.0   # a latency, then ~190 GB/s of algorithm bandwidth
        alg = size / (time_us * 1e3)
        bus = float(f"{alg * 1.75:.2f}")      # all-reduce on 8 ranks: busbw = algbw x 2(n-1)/n
        peak = max(peak, bus)
        out.write(f"{size:12d}  {size // 4:12d}     float     sum      -1  {time_us:7.2f}  {alg:6.2f}  {bus:6.2f}"
                  f"       0  {time_us:7.2f}  {alg:6.2f}  {bus:6.2f}       0\n")
    avg = float(f"{peak * 0.72:.3f}")
    out.write(FOOT.format(avg=avg))
    return peak, avg


def write_file(path: Path, rows: int, step: int = 1024) -> tuple[float, float]:
    with open(path, "w") as out:
        return write(out, rows, step)
