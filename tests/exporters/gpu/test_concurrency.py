"""The GPU collector reads a node's GPUs side by side (exporters/gpu/readers.py) over the fake NVML
(tests/fixtures/gpu/fake_pynvml.py): all eight meet inside their field batch at once, and one GPU's
NVML error, exception or hang costs only that GPU."""
from __future__ import annotations

import logging
import threading
import time

import pynvml
import pytest

from lockstep.exporters.gpu.backend import GpuOptions, parse_readers
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.toolkit import logs
from tests.helpers.gpu import Err, fake, h100, render

GPUS = 8
MEET_S = 10.0   # how long a barrier waits before it breaks: only a failing test ever waits it out
HEALTHY_WITHIN_S = 2.0   # a read timeout no healthy fake GPU comes near, loaded or not


def eight() -> list[dict]:
    """Eight H100s, each peering with every other (so the static reads cross GPUs too)."""
    return [h100(i, p2p={p: pynvml.NVML_P2P_STATUS_OK for p in range(GPUS) if p != i}) for i in range(GPUS)]


def up(text: str) -> dict[str, str]:
    return {line.split('"')[1]: line.rsplit(" ", 1)[1] for line in text.splitlines()
            if line.startswith("lockstep_gpu_up{")}


def collector(nvml, **options) -> GpuCollector:
    return GpuCollector(nvml, None, GpuOptions("nvml", hostname="node00", **options), watch_xid=False)


def meeting(parties: int, skip: int | None = None):
    """An on_call hook holding every field batch (but ``skip``'s) until ``parties`` of them are inside it."""
    barrier = threading.Barrier(parties, timeout=MEET_S)

    def on_call(key: str, gpu: int) -> None:
        if key == "fields" and gpu != skip:
            barrier.wait()
    return barrier, on_call


def test_eight_gpus_are_inside_nvml_at_the_same_time():
    barrier, on_call = meeting(GPUS)
    c = collector(fake.FakeNvml(eight(), on_call=on_call))
    try:
        text = render(c)
    finally:
        c.close()
    # Read one after another, the first batch would wait alone at the barrier until it broke.
    assert not barrier.broken
    assert up(text) == {str(i): "1" for i in range(GPUS)}
    assert 'lockstep_gpu_power_watts{gpu="7"} 702.5' in text


def test_one_gpus_nvml_error_costs_only_that_gpu():
    devices = eight()
    devices[5]["fields"] = Err(pynvml.NVML_ERROR_UNKNOWN)   # what a wedged GPU answers: GpuLost
    barrier, on_call = meeting(GPUS - 1, skip=5)
    c = collector(fake.FakeNvml(devices, on_call=on_call))
    try:
        text = render(c)
    finally:
        c.close()
    assert not barrier.broken
    assert up(text) == {**{str(i): "1" for i in range(GPUS)}, "5": "0"}
    assert 'lockstep_gpu_health{gpu="5",check="bus"} 2' in text
    assert 'lockstep_gpu_healthy{gpu="4"} 1' in text and 'lockstep_gpu_healthy{gpu="6"} 1' in text


def test_an_exception_in_one_gpus_read_is_logged_and_costs_only_that_gpu(caplog):
    logs._once.clear()

    def on_call(key: str, gpu: int) -> None:
        if key == "fields" and gpu == 2:
            raise RuntimeError("malformed answer")
    c = collector(fake.FakeNvml(eight(), on_call=on_call))
    try:
        with caplog.at_level(logging.ERROR, logger="lockstep.gpu"):
            text = render(c)
    finally:
        c.close()
    assert up(text) == {**{str(i): "1" for i in range(GPUS)}, "2": "0"}
    assert any("gpu 2: reading failed (RuntimeError: malformed answer)" in r.getMessage() for r in caplog.records)


def test_a_hung_gpu_is_reported_down_not_asked_again_and_back_once_it_answers(caplog):
    logs._once.clear()
    release, calls = threading.Event(), []

    def on_call(key: str, gpu: int) -> None:
        if key == "fields" and gpu == 3:
            calls.append(gpu)
            release.wait()
    # the hung GPU costs the first scrape its read timeout; the healthy ones must answer within it however loaded
    # the machine (at 0.2 s, one of them did not, with four test workers on two cores)
    c = collector(fake.FakeNvml(eight(), on_call=on_call), read_timeout_s=HEALTHY_WITHIN_S)
    try:
        with caplog.at_level(logging.WARNING, logger="lockstep.gpu"):
            first = render(c)
            second = render(c)
        for text in (first, second):
            assert up(text) == {**{str(i): "1" for i in range(GPUS)}, "3": "0"}
            assert 'lockstep_gpu_health{gpu="3",check="bus"} 2' in text
            assert 'lockstep_gpu_info{gpu="3"' in text   # its identity, read before the hang, stays
        assert calls == [3]                           # the second scrape did not pile a second read on it
        assert sum(f"gpu 3: NVML has not answered within {HEALTHY_WITHIN_S:g}s" in r.getMessage()
                   for r in caplog.records) == 1
        assert not [r.getMessage() for r in caplog.records if "gpu 3" not in r.getMessage()]
        release.set()
        deadline = time.monotonic() + 10
        while up(render(c))["3"] != "1":
            assert time.monotonic() < deadline, "GPU 3 not read again after its call returned"
            time.sleep(0.02)
    finally:
        release.set()
        c.close()


def test_one_reader_reads_in_the_scrapes_own_thread():
    threads = set()
    c = collector(fake.FakeNvml(eight(), on_call=lambda key, gpu: threads.add(threading.current_thread())),
                  readers=1)
    try:
        assert up(render(c)) == {str(i): "1" for i in range(GPUS)}
    finally:
        c.close()
    assert threads == {threading.current_thread()}


@pytest.mark.parametrize("text", ["0", "65", "four", "-1"])
def test_readers_flag_refuses_what_is_no_thread_count(text):
    with pytest.raises(ValueError, match="--gpu.readers"):
        parse_readers(text)
