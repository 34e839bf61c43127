"""Soak of the power exporter: 24 simulated hours of 200 Redfish targets (176 BMCs, 22 PDUs, 2 CDUs from
the DMTF mockups), 5 % of them flapping, time-compressed.

A separate process serves the targets (tests/helpers/redfish_mockup.py). Each flapping target cycles through
windows of ``--flap-rounds`` poll rounds: answering, HTTP 500, hung before the headers, answering,
stalled after the headers, trickling its body one byte at a time. The exporter's app
(``lockstep.exporters.power.app.create_app``) runs in this process; one poll round of every target is one
simulated 15 s interval, run back to back (the compression: ``--hours`` x 240 rounds, each as long as
its slowest target, the per-request timeout ``--timeout``), and ``/metrics`` is scraped after every
round and a flapping target's ``/probe`` every fourth, as Prometheus would. Sampled every simulated
half hour: this process's RSS (VmRSS), open descriptors, asyncio tasks; after the warm-up (the first
10 %) each must stay within 5 % of its median. Printed too: rounds in which a healthy target was down
(a flapping one delaying it), and the flapping targets' up fraction.

    python bench/bench_power_soak.py [--hours 24] [--timeout 0.5]
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from bench_node_agent import rss_bytes  # noqa: E402
from bench_power import KINDS, MOCKUPS, run_service  # noqa: E402
from bench_power import targets as all_targets  # noqa: E402
from bench_soak import FLAT, flat  # noqa: E402

from lockstep.exporters.power.app import POLLER, AppOptions, create_app  # noqa: E402
from lockstep.exporters.power.config import PowerConfig  # noqa: E402

ROUNDS_PER_HOUR = 240
FLAPPING = 10  # 5 % of 200
BAD = ("500", "hang", "stall", "trickle")   # a flapping target's failure, one per cycle in turn
CYCLE = 6                                   # windows per cycle: five answering, then one failing


def serve(port_queue, phase) -> None:
    """The targets; the flapping ones answer in the mode ``BAD[phase.value]``, or normally at -1 (set by
    the soak)."""
    from tests.helpers.redfish_mockup import MockupService

    svc = MockupService()
    for i, (_, mockup) in enumerate(KINDS):
        mode_of = (lambda: "ok" if phase.value < 0 else BAD[phase.value]) if flapping(f"t{i:03d}") else None
        svc.add(f"t{i:03d}", MOCKUPS / mockup, mode_of=mode_of)
    run_service(svc, port_queue)


def flapping(name: str) -> bool:
    return int(name[1:]) % (len(KINDS) // FLAPPING) == 0


def usage() -> tuple[int, int, int, int]:
    """RSS, descriptors other than sockets, sockets (the connection pools), asyncio tasks."""
    kinds = [_readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")]
    return rss_bytes(os.getpid()), kinds.count(False), kinds.count(True), len(asyncio.all_tasks())


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:   # the listing's own descriptor, closed since
        return ""


async def soak(base: str, phase, args: argparse.Namespace) -> tuple[list, dict]:
    targets = all_targets(base, hung=False)
    config = PowerConfig(targets, interval_s=args.timeout, timeout_s=args.timeout)
    runner = web.AppRunner(create_app(config, AppOptions(background=False)), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    poller, flappers = runner.app[POLLER], [t.name for t in targets if flapping(t.name)]
    samples, counts = [], {"healthy_down_rounds": 0, "flapper_up": 0, "flapper_polls": 0, "timeouts": 0,
                           "round_s": {}, "healthy_s": {}, "healthy_down": {}}
    started = time.monotonic()
    async with aiohttp.ClientSession() as scraper:
        for r in range(1, int(args.hours * ROUNDS_PER_HOUR) + 1):
            window = (r - 1) // args.flap_rounds
            phase.value = window // CYCLE % len(BAD) if window % CYCLE == CYCLE - 1 else -1
            round_started = time.monotonic()
            await poller.poll_all()
            counts["round_s"].setdefault(phase.value, []).append(time.monotonic() - round_started)
            async with scraper.get(url + "/metrics") as resp:
                assert resp.status == 200 and b"lockstep_redfish_up" in await resp.read()
            if r % 4 == 0:
                async with scraper.get(url + "/probe", params={"target": flappers[r // 4 % FLAPPING]}) as resp:
                    assert resp.status == 200
            tally(poller.results, counts, phase.value)
            if r % (args.flap_rounds * CYCLE * len(BAD)) == 0:   # the same point of the flapping each time
                samples.append((r, *usage()))
    counts["wall_s"] = time.monotonic() - started
    await runner.cleanup()
    return samples, counts


def tally(results: dict, counts: dict, phase: int) -> None:
    down = [f"{n}: {r.error}" for n, r in results.items() if not flapping(n) and not r.up]
    counts["healthy_down_rounds"] += bool(down)
    counts["healthy_down"].setdefault(phase, []).append(bool(down))
    counts.setdefault("healthy_errors", []).extend(down[:2])
    counts["healthy_s"].setdefault(phase, []).append(max(r.duration_s for n, r in results.items() if not flapping(n)))
    for name, result in results.items():
        if flapping(name):
            counts["flapper_polls"] += 1
            counts["flapper_up"] += result.up
            counts["timeouts"] += bool(result.error and result.error.endswith(("timed out", "deadline exceeded")))


def report(args: argparse.Namespace, samples: list, counts: dict) -> bool:
    warm = [s for s in samples if s[0] > args.hours * ROUNDS_PER_HOUR * 0.10]
    ok = True
    print(f"power exporter soak: {args.hours:g} simulated hours = {int(args.hours * ROUNDS_PER_HOUR)} poll rounds of "
          f"{len(KINDS)} targets ({FLAPPING} flapping: one window in {CYCLE} failing, as {', '.join(BAD)} in turn), "
          f"timeout {args.timeout:g} s, "
          f"run in {counts['wall_s'] / 60:.1f} min")
    kinds = (("RSS", 1e6, " MB"), ("descriptors other than sockets", 1, ""), ("asyncio tasks", 1, ""))
    for i, (what, scale, unit) in zip((1, 2, 4), kinds):
        values = [s[i] for s in warm]
        dev, good = flat(values)
        ok &= good
        print(f"  {what} after warm-up: {min(values) / scale:.1f}-{max(values) / scale:.1f}{unit}, worst deviation "
              f"from the median {dev:.1%} (budget {FLAT:.0%}: {'ok' if good else 'MISSED'})")
    sockets = [s[3] for s in warm]
    third = max(1, len(sockets) // 3)
    grown = max(sockets[-third:]) / max(sockets[:third]) - 1
    ok &= grown <= FLAT
    print(f"  sockets (the keep-alive pools; the client's at most {4 * PowerConfig(()).max_concurrency} by its "
          f"connector limit): "
          f"{', '.join(map(str, sockets))}; the last third's peak against the first third's {grown:+.1%} "
          f"({'ok' if grown <= FLAT else 'GROWING'})")
    print(f"  rounds with a healthy target down: {counts['healthy_down_rounds']}; flapping targets up in "
          f"{counts['flapper_up'] / max(counts['flapper_polls'], 1):.0%} of their polls, "
          f"{counts['timeouts']} polls reported as timed out (hung, stalled after the headers, trickling)")
    for phase, rounds in sorted(counts["round_s"].items()):
        healthy, down = counts["healthy_s"][phase], counts["healthy_down"][phase]
        print(f"  flapping targets {'answering' if phase < 0 else BAD[phase]:>9}: {len(rounds):5d} rounds, round "
              f"p50 {statistics.median(rounds):.2f} s, slowest healthy target p50 {statistics.median(healthy):.2f} s, "
              f"max {max(healthy):.2f} s, rounds with a healthy target down {sum(down) / len(down):.1%}")
    for error in sorted(set(counts.get("healthy_errors", [])))[:5]:
        print(f"    a healthy target down: {error}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (240 poll rounds each)")
    parser.add_argument("--timeout", type=float, default=1.0, help="per-request timeout and poll budget, seconds")
    parser.add_argument("--flap-rounds", type=int, default=20, help="poll rounds per window of a flapping target")
    args = parser.parse_args()
    logging.getLogger("lockstep").setLevel(logging.ERROR)  # the flapping targets' failures are expected
    context = multiprocessing.get_context("spawn")
    ports, phase = context.Queue(), context.Value("i", 0)
    server = context.Process(target=serve, args=(ports, phase), daemon=True)
    server.start()
    try:
        samples, counts = asyncio.run(soak(f"http://127.0.0.1:{ports.get(timeout=60)}", phase, args))
    finally:
        server.terminate()
        server.join(10)
    return 0 if report(args, samples, counts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
