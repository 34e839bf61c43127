"""Power exporter polling budget (docs/architecture.md: 200 Redfish targets polled concurrently in under
2 s; one hung BMC delays no other).

A separate process serves 200 simulated Redfish devices on one port under path prefixes, the way
the simulator does (176 BMCs from the DMTF rack server mockup, 22 PDUs, 2 CDUs), each request
answered after 50 ms, plus one device that never answers. Measured in the same run:
- the exporter's concurrent poll of all 200 targets (Poller.poll_all, shared ClientSession);
- the peer: the same targets polled one after another with the same client;
- the same concurrent poll with the hung target added: when each healthy target finished,
  against the hung target's timeout.
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters.power.config import PowerConfig, Target  # noqa: E402
from lockstep.exporters.power.poller import STRUCTURE_TTL_S, Poller  # noqa: E402
from lockstep.exporters.power.redfish import HttpRedfish  # noqa: E402

MOCKUPS = REPO / "tests/fixtures/redfish"
LATENCY_S, TIMEOUT_S, N = 0.05, 2.0, 200
KINDS = [("bmc", "public-rackmount1")] * 176 + [("pdu", "public-pdu")] * 22 + [("cdu", "public-cooling-unit")] * 2


def serve(port_queue) -> None:
    from tests.helpers.redfish_mockup import MockupService

    svc = MockupService()
    for i, (_, mockup) in enumerate(KINDS):
        svc.add(f"t{i:03d}", MOCKUPS / mockup, latency_s=LATENCY_S)
    svc.add("hung", MOCKUPS / "public-rackmount1", mode="hang")
    run_service(svc, port_queue)


def run_service(svc, port_queue) -> None:
    """Serve ``svc`` (a MockupService) on a free port until this process is ended; the port goes to
    ``port_queue``."""
    from aiohttp import web

    async def main() -> None:
        runner = web.AppRunner(svc.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
        port_queue.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def targets(base: str, hung: bool) -> tuple[Target, ...]:
    found = [Target(f"t{i:03d}", kind, f"{base}/t{i:03d}", rack=f"r{i // 9}") for i, (kind, _) in enumerate(KINDS)]
    # first in line, so it holds a concurrency slot from the start
    return tuple([Target("hung", "bmc", f"{base}/hung", rack="r99")] * hung + found)


async def finish_times(poller: Poller, config: PowerConfig) -> dict[str, float]:
    started = time.perf_counter()
    done: dict[str, float] = {}

    async def one(target: Target) -> None:
        result = await poller.poll(target)
        assert result.up == (target.name != "hung"), (target.name, result.error)
        done[target.name] = time.perf_counter() - started
    await asyncio.gather(*(one(t) for t in config.targets))
    return done


async def run(base: str) -> None:
    plain = PowerConfig(targets(base, hung=False), interval_s=15, timeout_s=TIMEOUT_S)
    with_hung = PowerConfig(targets(base, hung=True), interval_s=15, timeout_s=TIMEOUT_S)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=plain.max_concurrency * 4)) as session:
        redfish = HttpRedfish(session, plain.retries)
        poller = Poller(plain, redfish)
        await poller.poll_all()  # warm-up: connections, JSON caches on the server side
        rounds = []
        for _ in range(3):
            started = time.perf_counter()
            await poller.poll_all()
            rounds.append(time.perf_counter() - started)
            assert all(r.up for r in poller.results.values())
        concurrent = statistics.median(rounds)
        started = time.perf_counter()
        for target in plain.targets:  # the peer: one target after another
            assert (await poller.poll(target)).up
        sequential = time.perf_counter() - started
        first = Poller(plain, redfish)
        started = time.perf_counter()
        await first.poll_all()
        discovery = time.perf_counter() - started
        hung_poller = Poller(with_hung, redfish)
        await hung_poller.poll_all()  # discovery round, as after any restart
        done = await finish_times(hung_poller, with_hung)
    healthy = max(v for k, v in done.items() if k != "hung")
    print(f"targets: {N} ({LATENCY_S * 1000:.0f} ms per request), max_concurrency {plain.max_concurrency}")
    print(f"concurrent poll of {N} targets: {concurrent:.3f} s (median of 3; rounds {', '.join(f'{r:.3f}' for r in rounds)})"
          f"  budget < 2 s: {'PASS' if concurrent < 2 else 'FAIL'}")
    print(f"first poll after start (discovers every resource, ~11 requests per target; again every "
          f"{STRUCTURE_TTL_S:.0f} s and after a failure): {discovery:.3f} s")
    print(f"peer, sequential poll of the same targets: {sequential:.3f} s  "
          f"-> concurrent is {sequential / concurrent:.1f}x faster")
    print(f"with one hung target (timeout {TIMEOUT_S:g} s): last healthy target done at {healthy:.3f} s, "
          f"hung target given up at {done['hung']:.3f} s  "
          f"{'PASS' if healthy < TIMEOUT_S <= done['hung'] else 'FAIL'}: no healthy target waited for it")


def main() -> int:
    logging.getLogger("lockstep").setLevel(logging.ERROR)  # the hung target's failure is expected
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(target=serve, args=(ports,), daemon=True)
    server.start()
    try:
        asyncio.run(run(f"http://127.0.0.1:{ports.get(timeout=60)}"))
    finally:
        server.terminate()
        server.join(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
