"""CPU per scrape of the GPU collector on one simulated 8-GPU H100 node (``sim`` backend).

Measures, in one run on one gpus.json in the simulator's shape (8 GPUs, 18 NVLinks each, 7 P2P
peers): a whole scrape through the core (collect + encode + render, the gpu collector alone), the
same with gpus.json rewritten before every scrape (the simulator's live mode), and two peers:
``json.load`` of the same file, and prometheus_client's ``generate_latest`` over the same samples
(the exposition the core replaced). Budget: under 2 ms CPU per scrape.

``--nvml`` runs on a machine with an NVIDIA GPU instead: CPU per scrape through the real NVML and,
with ``--capture FILE``, which fields the GPU/driver supports (a JSON record to commit as a fixture)
and the same GPUs' ``nvidia-smi -q -x`` in FILE.xml (a capture for the replay backend, replayed once).
The record also holds each NVML function's wall time per call and the NVML errors it returned, measured
through a timing wrapper around pynvml over a few scrapes (what one scrape spends where).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pynvml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters.gpu.backend import GpuOptions, open_backend  # noqa: E402
from lockstep.exporters.gpu.collector import GpuCollector  # noqa: E402
from lockstep.exporters.scrape import Scraper  # noqa: E402

FIXTURE = REPO / "tests/fixtures/gpu/node00/gpus.json"
N, REPEATS = 300, 5


def node_doc() -> dict:
    doc = json.loads(FIXTURE.read_text())
    template = doc["gpus"][0]
    doc["gpus"] = [dict(template, index=i, uuid=template["uuid"][:-2] + f"{i:02d}", xid_events=[],
                        pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
                        nvlink=[{"link": n, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
                                for n in range(18)],
                        p2p={str(p): "ok" for p in range(8) if p != i}) for i in range(8)]
    return doc


def cpu_per_call(fn, n: int = N) -> float:
    """Median over REPEATS of process CPU seconds per call."""
    runs = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - start) / n)
    return statistics.median(runs)


def client_python_peer(samples: list) -> callable:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class Adapter:
        def collect(self):
            families = {}
            for metric, labels, value in samples:
                family = families.get(metric.name)
                if family is None:
                    kind = CounterMetricFamily if metric.type == "counter" else GaugeMetricFamily
                    family = families[metric.name] = kind(metric.name, metric.help, labels=metric.labels)
                family.add_metric(labels, value)
            yield from families.values()

    registry = CollectorRegistry()
    registry.register(Adapter())
    return lambda: generate_latest(registry)


class TimedNvml:
    """pynvml with every ``nvml*`` function timed (wall seconds per call) and its NVML errors counted."""

    def __init__(self, module) -> None:
        self._module = module
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, Counter] = defaultdict(Counter)

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if not (name.startswith("nvml") and callable(value)) or isinstance(value, type):
            return value

        def timed(*args):
            start = time.perf_counter()
            try:
                return value(*args)
            except pynvml.NVMLError as exc:
                self.errors[name][str(exc)] += 1
                raise
            finally:
                self.seconds[name].append(time.perf_counter() - start)
        return timed

    def table(self) -> dict[str, dict]:
        """Per function: calls, median and max microseconds per call, errors by message."""
        return {name: {"calls": len(times), "median_us": round(statistics.median(times) * 1e6, 1),
                       "max_us": round(max(times) * 1e6, 1), "errors": dict(self.errors.get(name, {}))}
                for name, times in sorted(self.seconds.items())}


def per_call_costs(scrapes: int = 5) -> dict[str, dict]:
    """What NVML costs per function over ``scrapes`` scrapes of a fresh collector (its first scrape
    opens the handles and reads the static facts, the rest are steady-state)."""
    timed = TimedNvml(pynvml)
    collector = GpuCollector(timed, None, GpuOptions("nvml", hostname=os.uname().nodename), watch_xid=True)
    for _ in range(scrapes):
        collector.collect()
    collector.close()
    return timed.table()


def field_costs(handle, repeats: int = 20) -> dict[str, dict]:
    """Each field of the collector's one ``nvmlDeviceGetFieldValues`` batch asked alone: median wall µs
    per call and the NVML return code (0 = answered), to see which fields the batch's time goes to."""
    from lockstep.exporters.gpu.read import FIELDS
    costs = {}
    for key, field in FIELDS.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            value = pynvml.nvmlDeviceGetFieldValues(handle, [field])[0]
            times.append(time.perf_counter() - start)
        costs[key] = {"median_us": round(statistics.median(times) * 1e6, 1), "nvml_return": value.nvmlReturn}
    return costs


def real_nvml(capture: Path | None) -> int:
    """Scrape cost and supported fields on this machine's GPUs through pynvml."""
    from lockstep.exporters.gpu.read import read_snapshot
    options = GpuOptions("nvml", hostname=os.uname().nodename)
    collector = GpuCollector(pynvml, None, options, watch_xid=True)
    samples = list(collector.collect())
    if not collector._handles:
        print("no NVIDIA driver/GPU on this machine (NVML init failed); nothing measured")
        return 0
    scraper = Scraper({"gpu": collector})
    per_scrape = cpu_per_call(scraper.render, n=50)
    wall = time.perf_counter()
    scraper.render()
    wall = time.perf_counter() - wall
    snaps = [read_snapshot(pynvml, collector._static[i], collector._handles[i])
             for i in sorted(collector._static)]
    record = {"driver": collector._driver, "gpus": len(collector._handles), "samples_per_scrape": len(samples),
              "cpu_ms_per_scrape": round(per_scrape * 1e3, 3), "wall_ms_per_scrape": round(wall * 1e3, 3),
              "snapshots": [dataclasses.asdict(snap) for snap in snaps],
              "field_costs_gpu0": field_costs(collector._handles[0])}
    collector.close()
    record["nvml_calls"] = per_call_costs()
    unsupported = sorted({f for snap in record["snapshots"] for f, v in snap.items() if v is None})
    print(f"NVML driver {record['driver']}, {record['gpus']} GPUs, {len(samples)} samples per scrape")
    print(f"CPU per scrape {record['cpu_ms_per_scrape']} ms, wall {record['wall_ms_per_scrape']} ms")
    print(f"fields absent (NotSupported / older driver): {', '.join(unsupported) or 'none'}")
    print("NVML function                                 calls  median us   max us  errors")
    for name, row in record["nvml_calls"].items():
        print(f"{name:<45} {row['calls']:>5} {row['median_us']:>10} {row['max_us']:>8}  {row['errors'] or ''}")
    print("nvmlDeviceGetFieldValues, one field at a time on GPU 0 (median us, NVML return):")
    print(", ".join(f"{key} {row['median_us']} ({row['nvml_return']})"
                    for key, row in record["field_costs_gpu0"].items()))
    if capture is not None:
        capture.write_text(json.dumps(record, indent=1, default=str) + "\n")
        save_smi_capture(capture.with_suffix(".xml"))
    return 0


def save_smi_capture(path: Path) -> None:
    """The same GPUs as ``nvidia-smi -q -x`` prints them (a fixture for the replay backend), checked by
    replaying it through the collector once."""
    import subprocess

    from lockstep.exporters.gpu.replay import ReplayNvml
    xml = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, timeout=60, check=True).stdout
    path.write_text(xml)
    replayed = GpuCollector(ReplayNvml(path), None, GpuOptions("replay", path), watch_xid=False)
    print(f"nvidia-smi -q -x written to {path}; replayed: {len(replayed.collect())} samples")
    replayed.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvml", action="store_true", help="measure the real NVML backend on this machine")
    parser.add_argument("--capture", type=Path, help="with --nvml: write what NVML returned to this JSON file")
    args = parser.parse_args()
    if args.nvml:
        return real_nvml(args.capture)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpus.json"
        text = json.dumps(node_doc(), separators=(",", ":"))
        path.write_text(text)
        options = GpuOptions("sim", path, dcgm_names=False, hostname="node00")
        collector = GpuCollector(*open_backend(options), options, watch_xid=True)
        scraper = Scraper({"gpu": collector})
        scraper.render()
        samples = list(collector.collect())

        def rewrite() -> None:  # what the simulator does between scrapes (not part of the scrape)
            tmp_path = path.with_suffix(".tmp")
            tmp_path.write_text(text)
            os.replace(tmp_path, path)
            os.utime(path, ns=(0, time.time_ns()))

        def rewrite_and_scrape() -> None:
            rewrite()
            scraper.render()

        scrape = cpu_per_call(scraper.render)
        reload = cpu_per_call(rewrite_and_scrape) - cpu_per_call(rewrite)
        options_dcgm = GpuOptions("sim", path, dcgm_names=True, hostname="node00")
        dcgm_scraper = Scraper({"gpu": GpuCollector(*open_backend(options_dcgm), options_dcgm, watch_xid=False)})
        dcgm = cpu_per_call(dcgm_scraper.render)
        json_load = cpu_per_call(lambda: json.loads(path.read_text()))
        client = cpu_per_call(client_python_peer(samples), n=50)
        collector.close()

    print(f"samples per scrape:                        {len(samples)} (8 GPUs)")
    print(f"lockstep scrape, file unchanged:           {scrape * 1e3:.3f} ms CPU (budget 2 ms)")
    print(f"lockstep scrape, file changed since last:  {reload * 1e3:.3f} ms CPU (re-parses gpus.json)")
    print(f"lockstep scrape with --gpu.metric-names=dcgm: {dcgm * 1e3:.3f} ms CPU")
    print(f"peer json.loads(gpus.json):                {json_load * 1e3:.3f} ms CPU")
    print(f"peer prometheus_client generate_latest:    {client * 1e3:.3f} ms CPU (same samples)")
    print(f"ratio scrape / generate_latest:            {scrape / client:.2f}")
    print(f"ratio scrape(changed) / json.loads:        {reload / json_load:.2f}")
    return 0 if scrape < 2e-3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
