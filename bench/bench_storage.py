"""Storage exporter polling budget: 50 storage targets (fake MinIO deployments serving MinIO's recorded
bucket answer, tests/fixtures/minio, widened to 20 buckets each), one of them hung.

A separate process serves the fakes. Measured in the same run:
- a poll round of the 50 targets with the hung one (Poller.poll_all): its wall time against the poll
  interval (budget: ratio < 1; the round ends when the hung target's timeout_s does);
- the exporter's CPU per target (fetch, parse, map), budget < 10 ms: 50 targets then cost under 0.5 s of
  one core per round, 5 % of it at this 10 s interval; reported against the baseline, the same answers
  fetched with the same aiohttp client and read, not parsed.
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters.storagesys.config import StorageConfig, Target  # noqa: E402
from lockstep.exporters.storagesys.poller import Poller  # noqa: E402

N, BUCKETS, INTERVAL_S, TIMEOUT_S, ROUNDS = 50, 20, 10.0, 2.0, 3
CPU_PER_TARGET_BUDGET_S = 0.010


def serve(port_queue) -> None:
    from aiohttp import web

    from tests.helpers.storagefake import MINIO_BUCKET, Behaviour, FakeStorage

    body = "".join("".join(line.replace('bucket="mybucket"', f'bucket="ckpt-{i:02d}"') + "\n" for i in range(BUCKETS))
                   if 'bucket="mybucket"' in line else line + "\n" for line in MINIO_BUCKET.splitlines())
    fake = FakeStorage()
    for i in range(N - 1):
        fake.add(f"s{i:02d}", Behaviour(body=body))
    fake.add("hung", Behaviour(mode="hang"))

    async def main() -> None:
        runner = web.AppRunner(fake.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
        port_queue.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


async def run(base: str) -> None:
    names = [f"s{i:02d}" for i in range(N - 1)] + ["hung"]
    config = StorageConfig(tuple(Target(n, "minio", f"{base}/{n}") for n in names), INTERVAL_S, TIMEOUT_S)
    healthy = [t for t in config.targets if t.name != "hung"]
    async with aiohttp.ClientSession() as session:
        poller = Poller(config, session)
        walls, cpus = [], []
        for _ in range(ROUNDS):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await poller.poll_all()
            walls.append(time.perf_counter() - wall0)
            cpus.append(time.process_time() - cpu0)
        up = sum(1 for r in poller.results.values() if r.up)
        series = sum(len(r.samples) for r in poller.results.values())
        # Baseline: the same requests, bodies read, nothing parsed (the hung target left out: it costs no CPU).
        base_cpus = []
        for _ in range(ROUNDS):
            cpu0 = time.process_time()
            for chunk in range(0, len(healthy), config.max_concurrency):
                await asyncio.gather(*(_fetch(session, t.url) for t in healthy[chunk:chunk + config.max_concurrency]))
            base_cpus.append(time.process_time() - cpu0)
    wall, cpu, base_cpu = sorted(walls)[1], sorted(cpus)[1], sorted(base_cpus)[1]
    print(f"targets: {N} (one hung; {BUCKETS} buckets each), timeout {TIMEOUT_S:g} s, interval {INTERVAL_S:g} s, "
          f"max_concurrency {config.max_concurrency}; {up} up, {series} series")
    print(f"poll round wall time: {wall:.3f} s (median of {ROUNDS}) -> round/interval {wall / INTERVAL_S:.2f}  "
          f"budget < 1: {'PASS' if wall < INTERVAL_S and up == N - 1 else 'FAIL'}")
    per, base_per = cpu / (N - 1), base_cpu / (N - 1)
    print(f"CPU per target: {per * 1000:.2f} ms; baseline (same fetches, not parsed) {base_per * 1000:.2f} ms "
          f"-> ratio {per / base_per:.1f}  budget < {CPU_PER_TARGET_BUDGET_S * 1000:g} ms: "
          f"{'PASS' if per < CPU_PER_TARGET_BUDGET_S else 'FAIL'}")


async def _fetch(session: aiohttp.ClientSession, url: str) -> None:
    async with session.get(url + "/minio/v2/metrics/bucket") as resp:
        await resp.read()


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
