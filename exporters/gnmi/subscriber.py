"""One gNMI Subscribe (STREAM, SAMPLE) per switch in a background thread, reconnecting with backoff; the last
value of every series is kept per switch, and ``samples()`` serves them with the subscription's health.

A SAMPLE subscription sends every path each sample interval, so a value not sent again for ``STALE_INTERVALS``
intervals (at least ``STALE_MIN_S``) is no longer served: a switch whose subscription broke, or a port that
stopped being reported, goes absent in Prometheus instead of showing its last counters frozen (a storm that
looks over) or its last watchdog state forever. A reconnect within that time keeps the series continuous."""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterator

import grpc

from lockstep.exporters.catalog import gnmi as m
from lockstep.exporters.gnmi.config import SwitchConfig, Target
from lockstep.exporters.gnmi.decode import decode
from lockstep.exporters.gnmi.paths import PATH_SETS, subscribe_request
from lockstep.exporters.third_party.gnmi import gnmi_pb2_grpc
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.switch")
BACKOFF_START_S = 0.5
STALE_INTERVALS = 3      # sample intervals without a value before it is no longer served
STALE_MIN_S = 30.0       # ...but never sooner: a switch may sample less often than asked


def channel(target: Target) -> grpc.Channel:
    if target.tls is None:
        return grpc.insecure_channel(target.address)
    creds = grpc.ssl_channel_credentials(target.tls.ca, target.tls.key, target.tls.cert)
    options = [("grpc.ssl_target_name_override", target.tls.server_name)] if target.tls.server_name else []
    return grpc.secure_channel(target.address, creds, options)


class SwitchState:
    """What one switch's subscription has seen; written by its thread, read by scrapes."""

    def __init__(self, target: Target, clock=time.monotonic) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.values: dict[tuple, tuple[Sample, float]] = {}   # each series' last sample and when it came
        self.up = False
        self.last_update: float | None = None
        self.updates = 0
        self.errors = {"rpc": 0, "decode": 0}
        self.clock = clock
        self.stale_after_s = max(STALE_INTERVALS * target.sample_interval_s, STALE_MIN_S)

    def keep(self, samples: list[Sample]) -> None:
        """The switch sent these values now (the caller holds ``lock``)."""
        now = self.clock()
        for sample in samples:
            self.values[(sample.metric.name, sample.labels)] = (sample, now)

    def samples(self) -> list[Sample]:
        name = self.target.name
        with self.lock:
            oldest = self.clock() - self.stale_after_s
            for key in [k for k, (_, at) in self.values.items() if at < oldest]:
                del self.values[key]
            out = [Sample(m.TARGET_INFO, (name, self.target.address, self.target.path_set), 1.0),
                   Sample(m.UP, (name,), 1.0 if self.up else 0.0), Sample(m.UPDATES, (name,), float(self.updates)),
                   *(Sample(m.ERRORS, (name, kind), float(n)) for kind, n in self.errors.items()),
                   *(Sample(m.NEIGHBOR_INFO, (name, port, n.node, n.interface, n.switch, n.port), 1.0)
                     for port, n in self.target.neighbors),
                   *(sample for sample, _ in self.values.values())]
            if self.last_update is not None:
                out.append(Sample(m.LAST_UPDATE, (name,), self.last_update))
        return out


class Subscriber:
    def __init__(self, config: SwitchConfig) -> None:
        self.config = config
        self.states = {t.name: SwitchState(t) for t in config.targets}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._calls: dict[str, grpc.Future] = {}

    def start(self) -> None:
        for state in self.states.values():
            thread = threading.Thread(target=self._run, args=(state,), name=f"gnmi-{state.target.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for call in list(self._calls.values()):
            call.cancel()
        for thread in self._threads:
            thread.join(timeout=5)

    def samples(self) -> Iterator[Sample]:
        for state in self.states.values():
            yield from state.samples()

    def _run(self, state: SwitchState) -> None:
        backoff = BACKOFF_START_S
        while not self._stop.is_set():
            try:
                if self._subscribe(state):
                    backoff = BACKOFF_START_S  # the stream was open: the next try starts short again
            except Exception as exc:  # anything else must not end this switch's thread: it would never reconnect
                with state.lock:
                    state.errors["rpc"] += 1
                log.exception("gNMI subscription broke; reconnecting", extra=kv(
                    switch=state.target.name, address=state.target.address, err=f"{type(exc).__name__}: {exc}"))
            with state.lock:
                state.up = False
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.config.reconnect_max_s)

    def _subscribe(self, state: SwitchState) -> bool:
        """One subscription until it ends; True if any notification came."""
        target = state.target
        request = subscribe_request(PATH_SETS[target.path_set], target.sample_interval_s)
        metadata = ([("username", target.credentials.username), ("password", target.credentials.password)]
                    if target.credentials else None)
        received = False
        with channel(target) as chan:
            call = gnmi_pb2_grpc.gNMIStub(chan).Subscribe(iter([request]), metadata=metadata)
            self._calls[target.name] = call
            if self._stop.is_set():   # stop() ran before the call was registered: it did not cancel this one
                call.cancel()
            try:
                for response in call:
                    if response.HasField("update"):
                        received = True
                        self._apply(state, response.update)
                    elif response.HasField("sync_response"):
                        log.info("gNMI subscription synced", extra=kv(switch=target.name, address=target.address))
                if not self._stop.is_set():  # a STREAM subscription has no end: the switch went away
                    with state.lock:
                        state.errors["rpc"] += 1
                    log.warning("gNMI stream ended by the switch; reconnecting", extra=kv(
                        switch=target.name, address=target.address))
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    return received
                with state.lock:
                    state.errors["rpc"] += 1
                log.warning("gNMI subscription failed; reconnecting", extra=kv(
                    switch=target.name, address=target.address, code=exc.code().name, details=exc.details()))
            finally:
                self._calls.pop(target.name, None)
        return received

    def _apply(self, state: SwitchState, notification) -> None:
        decoded = decode(state.target.path_set, state.target.name, notification)
        with state.lock:
            state.up = True
            state.last_update = time.time()
            state.updates += decoded.updates
            state.errors["decode"] += len(decoded.errors)
            state.keep(decoded.samples)
        for error in decoded.errors[:3]:  # one broken update per notification would flood the log
            log.warning("gNMI update not decoded", extra=kv(switch=state.target.name, error=error))
