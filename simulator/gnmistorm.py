"""A PFC storm as Ethernet switches see it, for the fake gNMI switches (``simulator/gnmi.py``): SONiC COUNTERS_DB
recordings as a function of time, in the shape of tests/fixtures/gnmi/sonic.json.

The storm starts at one host that stops draining: from ``start`` it pauses its switch port (the origin: pause
frames and pause time received, ``rx``) on ``priority``; after ``spread_s`` the origin switch, its buffers full,
pauses every other port of it (``tx``), so each switch cabled to one of those ports sees its own port paused
(``rx``: a relay); after ``watchdog_s`` the origin switch's PFC watchdog holds the origin's queue as stormed.
Everything stops at ``end``. Times are Unix seconds, so a live run and its scrapes share one clock."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.simulator.gnmi import Recording, load_recording

PAUSED_SHARE = 0.9        # of wall time the origin's host keeps its port paused
RELAY_SHARE = 0.6         # ... and the origin switch keeps its other ports paused
PAUSES_PER_S = 20_000     # pause frames a paused port sees a second (a quanta-sized refresh)


@dataclass(frozen=True)
class Storm:
    switch: str
    port: str
    priority: int
    start: float
    end: float
    spread_s: float = 2.0
    watchdog_s: float = 4.0


@dataclass(frozen=True)
class Switch:
    name: str
    ports: tuple[str, ...]
    uplinks: tuple[tuple[str, str, str], ...] = ()  # (own port, other switch, its port)


def _seconds(start: float, end: float, now: float) -> float:
    return max(0.0, min(now, end) - start)


def recording(storm: Storm, switches: tuple[Switch, ...], switch: str, now: float) -> Recording:
    """What ``switch`` publishes at ``now``."""
    me = next(s for s in switches if s.name == switch)
    relays = {(other, their) for s in switches if s.name == storm.switch for _, other, their in s.uplinks}
    relays |= {(s.name, own) for s in switches for own, other, _ in s.uplinks if other == storm.switch}
    spread = storm.start + storm.spread_s
    ports, wd = {}, {}
    for port in me.ports:
        rx = tx = 0.0
        if (switch, port) == (storm.switch, storm.port):
            rx = PAUSED_SHARE * _seconds(storm.start, storm.end, now)
        elif switch == storm.switch:
            tx = RELAY_SHARE * _seconds(spread, storm.end, now)
        elif (switch, port) in relays:
            rx = RELAY_SHARE * _seconds(spread, storm.end, now)
        p = storm.priority
        ports[port] = {f"SAI_PORT_STAT_PFC_{p}_RX_PKTS": str(int(rx * PAUSES_PER_S)),
                       f"SAI_PORT_STAT_PFC_{p}_TX_PKTS": str(int(tx * PAUSES_PER_S)),
                       f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US": str(int(rx * 1e6))}
        held = (switch, port) == (storm.switch, storm.port) and storm.start + storm.watchdog_s <= now < storm.end
        detected = (switch, port) == (storm.switch, storm.port) and now >= storm.start + storm.watchdog_s
        wd[f"{port}:{p}"] = {"PFC_WD_ACTION": "drop", "PFC_WD_STATUS": "stormed" if held else "operational",
                             "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": str(int(detected)),
                             "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": str(int(detected and now >= storm.end))}
    return load_recording({"prefix_target": "COUNTERS_DB", "updates": [
        {"path": "COUNTERS/Ethernet*", "json_ietf": ports},
        {"path": "COUNTERS/Ethernet*/Pfcwd", "json_ietf": wd}]})
