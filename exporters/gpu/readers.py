"""A bounded pool of daemon threads that read GPUs side by side, one task per GPU per scrape.

NVML is documented thread-safe ("NVML is thread-safe so it is safe to make simultaneous NVML calls
from multiple threads", NVIDIA's NVML API Reference, docs.nvidia.com/deploy/nvml-api/), and pynvml
calls it through ctypes, which releases the GIL for the length of each C call: eight GPUs' field
batches (milliseconds each in the driver) overlap instead of adding up.

Not ``concurrent.futures.ThreadPoolExecutor``: its workers are joined at interpreter exit, so one
NVML call that never returns (a wedged GPU) would keep the node agent from exiting on SIGTERM.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

MAX_READERS = 16   # the most GPUs a node holds today (HGX and NVL boards hold 8, some PCIe hosts 10-16)


class ReaderPool:
    def __init__(self, workers: int = MAX_READERS, name: str = "lockstep-gpu-read") -> None:
        self._tasks: "queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple] | None]" = queue.SimpleQueue()
        self._workers, self._name = workers, name
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            # A thread per task until the bound, as ThreadPoolExecutor does: 8 GPUs start 8 readers.
            if self._idle == 0 and len(self._threads) < self._workers:
                thread = threading.Thread(target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            elif self._idle:
                self._idle -= 1
        self._tasks.put((future, fn, args))
        return future

    def close(self) -> None:
        """Ask every reader to stop after its task; a reader stuck in NVML is left to the process's exit."""
        for _ in self._threads:
            self._tasks.put(None)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the scrape, which reports that GPU alone
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1
