"""Wall time of one GPU collector scrape of 8 simulated GPUs whose NVML calls take as long as a real
driver's: the GPUs read one after another (``--gpu.readers 1``, before) against side by side (the
default, after), in the same run, as a ratio.

The delays are the real H200's (tests/fixtures/gpu/nvml-h200/nvml-busy.json, ``nvml_calls``: each NVML
function's median wall time per call under load; the field batch is about 3.3 ms of it). Each call
sleeps that long before the simulator answers, and ``time.sleep`` lets go of the GIL as ctypes does
around a real NVML call. Calls under 100 µs are not delayed: a sleep that short lasts longer than asked
(timer slack), and they add up to well under one field batch per GPU. Budget: after / before <= 0.5.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_gpu import node_doc  # noqa: E402

from lockstep.exporters.gpu.backend import GpuOptions  # noqa: E402
from lockstep.exporters.gpu.collector import GpuCollector  # noqa: E402
from lockstep.exporters.gpu.sim import SimNvml  # noqa: E402

CAPTURE = REPO / "tests/fixtures/gpu/nvml-h200/nvml-busy.json"
MIN_DELAY_S = 100e-6
SCRAPES, BUDGET = 40, 0.5


class DriverPacedNvml:
    """The simulator's NVML with each call as slow as the captured driver's."""

    ANSWERS_IN_PYTHON = False   # each call sleeps outside the GIL first, as a real one runs in the driver

    def __init__(self, inner: SimNvml, delays: dict[str, float]) -> None:
        self._inner, self._delays = inner, delays

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        delay = self._delays.get(name, 0.0)
        if not name.startswith("nvml") or delay < MIN_DELAY_S or name == "nvmlEventSetWait":
            return value

        def paced(*args: Any) -> Any:
            time.sleep(delay)
            return value(*args)
        return paced


def delays() -> dict[str, float]:
    calls = json.loads(CAPTURE.read_text())["nvml_calls"]
    return {name: row["median_us"] * 1e-6 for name, row in calls.items()}


def wall_per_scrape(path: Path, readers: int, paced: dict[str, float]) -> tuple[float, int]:
    """Median wall seconds of a steady-state scrape (the first, which opens the devices, not counted)."""
    options = GpuOptions("sim", path, hostname="node00", readers=readers)
    collector = GpuCollector(DriverPacedNvml(SimNvml(path), paced), None, options, watch_xid=False)
    try:
        samples = len(collector.collect())
        times = []
        for _ in range(SCRAPES):
            start = time.perf_counter()
            collector.collect()
            times.append(time.perf_counter() - start)
    finally:
        collector.close()
    return statistics.median(times), samples


def main() -> int:
    paced = delays()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpus.json"
        path.write_text(json.dumps(node_doc(), separators=(",", ":")))
        before, samples_before = wall_per_scrape(path, 1, paced)
        after, samples_after = wall_per_scrape(path, GpuOptions("sim").readers, paced)
    assert samples_before == samples_after, (samples_before, samples_after)
    batch = paced["nvmlDeviceGetFieldValues"]
    print(f"8 GPUs, {samples_after} samples per scrape, captured field batch {batch * 1e3:.1f} ms per GPU")
    print(f"wall per scrape, GPUs one after another (--gpu.readers 1): {before * 1e3:.1f} ms")
    print(f"wall per scrape, GPUs side by side (default):             {after * 1e3:.1f} ms")
    print(f"ratio side by side / one after another:                   {after / before:.2f} (budget {BUDGET})")
    return 0 if after / before <= BUDGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
