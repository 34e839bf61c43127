"""Fabric exporter sweep budget (docs/deploy.md, "The fabric exporter"): one sweep of the simulated 128-node,
two-tier, 8-rail fabric (simulator/ibfabric.py: 1,024 HCAs, 32 leaves, 16 spines, 4,096 ports) with one leaf
that never answers, through the exporter's own sweep, its real subprocess runner and the simulated tools
(simulator/ibtools.py), then recorded and rendered as one scrape would.

Two sweeps, each measured the same way: the default one (every switch and every HCA: one perfquery per
node, 1,072 runs, where the HCAs' 1,024 dominate), and the switches-only one (``--no-sweep.hcas``: 48 runs,
host links read at their leaf's end; the HCA side comes from the node agents). Measured, as ratios:
- the sweep's wall time against the sweep interval (60 s, the default): it must fit (< 1);
- the exporter's own CPU per sweep (this process: spawning, reading, parsing, verdicts, rendering) against the
  CPU of the tools it ran (the children): the exporter's overhead on top of what infiniband-diags costs.
"""
from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters.switches.config import FabricConfig  # noqa: E402
from lockstep.exporters.switches.state import FabricState  # noqa: E402
from lockstep.exporters.switches.sweep import sweep  # noqa: E402
from lockstep.exporters.toolkit.exposition import Encoder, render_families  # noqa: E402

INTERVAL_S, NODE_TIMEOUT_S, WORKERS = 60.0, 5.0, 8
BUDGET_INTERVAL_RATIO = 1.0      # a sweep must end before the next one is due
BUDGET_CPU_RATIO = 0.5           # the exporter costs at most half of what the tools it runs cost


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(spec: Path, sweep_hcas: bool) -> bool:
    tools = (sys.executable, "-m", "lockstep.simulator.ibtools", str(spec))
    config = FabricConfig((*tools, "ibnetdiscover"), (*tools, "perfquery"), INTERVAL_S, 60.0, NODE_TIMEOUT_S, WORKERS,
                          sweep_hcas=sweep_hcas)
    state = FabricState(config)
    cpu0, kids0, wall0 = time.process_time(), children_cpu(), time.monotonic()
    result = sweep(config)
    state.record(result)
    families: dict = {}
    Encoder().add(families, list(state.samples()))
    text = render_families(families, False)
    wall, cpu, kids = time.monotonic() - wall0, time.process_time() - cpu0, children_cpu() - kids0
    down = [n.name for n in result.nodes.values() if not n.up]
    print(f"{'every switch and HCA' if sweep_hcas else 'switches only (--no-sweep.hcas)'}:")
    print(f"sweep: {len(result.ports)} ports, {len(result.nodes)} perfquery runs ({len(down)} down: {', '.join(down)}), "
          f"{len(text) / 1e6:.1f} MB exposition")
    print(f"sweep wall {wall:.1f}s against interval {INTERVAL_S:g}s: ratio {wall / INTERVAL_S:.2f} "
          f"(budget < {BUDGET_INTERVAL_RATIO:g})")
    print(f"exporter CPU {cpu:.2f}s per sweep against the tools' {kids:.2f}s: ratio {cpu / kids:.2f} "
          f"(budget < {BUDGET_CPU_RATIO:g})")
    ok = wall / INTERVAL_S < BUDGET_INTERVAL_RATIO and cpu / kids < BUDGET_CPU_RATIO and down == ["ib-leaf-r3-1"]
    print("OK" if ok else "OVER BUDGET")
    return ok


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "fabric.json"
        spec.write_text(json.dumps({"nodes": 128, "rails": 8, "spines": 16, "start_timestamp": time.time() - 3600,
                                    "unreachable": ["ib-leaf-r3-1"]}))
        results = [measure(spec, sweep_hcas) for sweep_hcas in (True, False)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
