"""Chaos figures (tests/helpers/chaos.py; behaviour checks of the same, time-compressed: tests/integration/test_chaos.py).

1. Prometheus SIGKILLed under the analytics service and restarted on the same port and data, on the
   service test's simulated run (backfilled blocks; the service's clock is injected: a refresh 2 min
   into the run, refreshes 6 min in while Prometheus is gone, then at the end of the run). Printed: the
   refreshes that failed while stale results were served, the refreshes the catch-up took, and the
   GPU-seconds the outage cost the loss account: the account against the same run refreshed every 30 s
   without an outage, per cause, and the account against the simulator's truth.
2. Alertmanager down for ``--am-outage`` seconds (default 300) while a page-severity alert starts
   firing, with Prometheus' default resend delay (1 m), the generated Alertmanager config's default
   page grouping (10 s) and evaluation interval (15 s): nothing compressed but the alert's condition.
   Printed: when the page arrived after Alertmanager came back, and Prometheus' failed sends.

    python bench/bench_chaos.py [--am-outage 300]
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.analytics.evaluation.evaluate import simulate  # noqa: E402
from lockstep.localcluster import backfill  # noqa: E402
from lockstep.stack import Stack, start_prometheus  # noqa: E402
from tests.helpers.analytics_service import PROM_CONFIG, SCENARIO, service_config  # noqa: E402
from tests.helpers.chaos import alertmanager_outage, prometheus_outage, refreshed  # noqa: E402

JOB = "7300"


async def steady(url: str, sim, window_s: float, interval_s: float = 30.0) -> object:
    """The run's loss account without an outage: a refresh every ``interval_s`` of the run, each scoring
    the ``window_s`` before it (the reference for the account across the outage)."""
    from aiohttp import web

    from lockstep.analytics.service.app import create_app
    from lockstep.analytics.service.keys import STATE

    start, end = sim.start, sim.start + sim.truth["duration_s"]
    clock = [start + 120]
    app = create_app(dataclasses.replace(service_config(url, sim), window_s=window_s, now=lambda: clock[0]))
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        while True:
            await refreshed(app)
            if clock[0] == end:
                return app[STATE].losses[JOB]
            clock[0] = min(end, clock[0] + interval_s)
    finally:
        await runner.cleanup()


async def analytics_chaos(work: Path) -> None:
    sim = simulate(SCENARIO)
    backfill(sim.frame, work, max_block_duration="24h")
    start, end = sim.start, sim.start + sim.truth["duration_s"]
    with Stack() as stack:
        prom = stack.add(start_prometheus(PROM_CONFIG, work))
        reference = await steady(prom.url, sim, window_s=125)
        port = int(prom.url.rsplit(":", 1)[1])
        out = await prometheus_outage(prom, lambda: stack.add(start_prometheus(PROM_CONFIG, work, port)),
                                      dataclasses.replace(service_config(prom.url, sim), window_s=125), JOB,
                                      (start + 120, start + 360, end), chunks=6)
    got, truth = out.counters, sim.truth["loss"]
    print(f"Prometheus SIGKILLed 2 min into a {sim.truth['duration_s']:.0f} s run of {JOB} and restarted: "
          f"{out.failed_refreshes} refreshes failed meanwhile, stale results served: "
          f"{'yes' if out.stale_served and out.same_results else 'NO'}; caught up in {out.refreshes_to_catch_up} "
          f"refreshes, accounted until the run's end: {'yes' if got.accounted_until == end else 'NO'}")
    print(f"  GPU-seconds the outage cost the account (against refreshes every 30 s, no outage): allocated "
          f"{got.allocated - reference.allocated:+.1f}; lost " +
          ", ".join(f"{c} {got.lost[c] - reference.lost[c]:+.1f}" for c in sorted(got.lost)))
    print(f"  the account against the simulator's truth: allocated {got.allocated:.0f} of "
          f"{truth['allocated_gpu_seconds']:.0f}; lost " +
          ", ".join(f"{c} {got.lost[c]:.0f} of {truth['lost_gpu_seconds'].get(c, 0.0):.0f}" for c in sorted(got.lost)))


async def alertmanager_chaos(work: Path, outage_s: float) -> None:
    out = await alertmanager_outage(work, outage_s=outage_s, resend_delay="1m", evaluation_interval="15s",
                                    routing={}, deadline_s=300)
    paged = "NEVER" if out.paged_at is None else f"{out.paged_at - out.back_at:.1f} s"
    print(f"Alertmanager down {outage_s:.0f} s while a page started firing (resend delay 1 m, page group_wait 10 s, "
          f"evaluation 15 s): {out.errors_while_down:.0f} sends failed while it was down; the page arrived {paged} "
          f"after it came back ({out.back_at - out.fired_at:.0f} s after the alert became active)")


def main() -> int:
    logging.getLogger("lockstep").setLevel(logging.ERROR)   # the failed refreshes are the point
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--am-outage", type=float, default=300.0, help="seconds Alertmanager is down")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(analytics_chaos(Path(tmp) / "prom"))
        asyncio.run(alertmanager_chaos(Path(tmp) / "am", args.am_outage))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
