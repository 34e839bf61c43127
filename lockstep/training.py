"""Each rank's step ends, handed to the node's lockstep agent: the job's own pace, per rank.

In the training loop, after each optimizer step::

    from lockstep.training import step_end
    ...
        optimizer.step()
        step_end(step)          # the step number is optional

with ``train_start()`` called once before the loop (so its first step is timed too), or with a framework's
callback (its framework imported only when the callback is first named)::

    trainer = lightning.Trainer(callbacks=[lockstep.training.LightningCallback()])
    trainer = transformers.Trainer(..., callbacks=[lockstep.training.HuggingFaceCallback()])

``step_end()`` never waits and never calls the network: it adds the step to counters held in the process, and at
most once a second (``LOCKSTEP_STEPS_INTERVAL``) sends their totals as one non-blocking datagram to the agent's
local socket (``LOCKSTEP_STEPS_SOCKET``, default ``/run/lockstep/steps.sock``; the agent's ``--collector.steps``).
No agent, or an agent too slow to read, drops that datagram and counts it (``stats()``); the next carries the
totals. ``LOCKSTEP_STEPS=0`` turns it into a no-op. Who the rank is comes from the environment once, at the first
call (``lockstep.exporters.catalog.stepfeed.identity``: ``RANK``/``SLURM_PROCID``, ``LOCAL_RANK``,
``SLURM_JOB_ID``, ``CUDA_VISIBLE_DEVICES`` or ``LOCKSTEP_GPU``); the agent names the job from the GPU it holds.

Only the standard library and lockstep's catalog are imported; the callbacks import Lightning
(``lightning.pytorch``, else ``pytorch_lightning``) or ``transformers`` when first named.
"""
from __future__ import annotations

import atexit
import os
import secrets
import socket
import time
from typing import Any, Mapping

from lockstep.exporters.catalog import stepfeed

__all__ = ["step_end", "train_start", "configure", "stats"]   # the callbacks too, by name (see __getattr__)


class Feed:
    """One process's step counters and the datagrams that carry them."""

    __slots__ = ("path", "interval", "identity", "pid", "session", "steps", "seconds", "last", "step",
                 "next_send", "sock", "sent", "dropped")

    def __init__(self, env: Mapping[str, str], path: str | None = None, interval: float | None = None) -> None:
        self.path = path or env.get(stepfeed.ENV_SOCKET) or stepfeed.DEFAULT_SOCKET
        try:
            self.interval = float(interval if interval is not None else env.get(stepfeed.ENV_INTERVAL) or
                                  stepfeed.DEFAULT_INTERVAL_S)
        except ValueError:
            self.interval = stepfeed.DEFAULT_INTERVAL_S
        self.identity = stepfeed.identity(env)
        self.pid, self.session = os.getpid(), secrets.token_hex(8)
        self.steps, self.seconds, self.last, self.step = 0, 0.0, None, -1
        self.next_send, self.sock, self.sent, self.dropped = 0.0, None, 0, 0

    def start(self, _clock=time.monotonic) -> None:
        """The loop starts (or resumes) now: the next step end is timed from here, no step is counted, and the
        totals are sent (the agent holds the rank from its start: a first sample for its first step to count from,
        and a rank stuck before its first step is seen)."""
        self.last = _clock()
        self.send(self.last)

    def end(self, step: Any = None, _clock=time.monotonic) -> None:
        now = _clock()
        if self.last is not None:
            self.seconds += now - self.last
        self.last = now
        self.steps += 1
        if step is not None:
            self.step = step
        if now >= self.next_send:
            self.send(now)

    def send(self, now: float | None = None) -> None:
        """Send the totals now, whatever the interval (non-blocking)."""
        now = time.monotonic() if now is None else now
        self.next_send = now + self.interval
        if self.last is None:
            return
        try:
            step = int(self.step)
        except (TypeError, ValueError):
            step = -1
        wall = time.time() - time.monotonic() + self.last
        report = stepfeed.Report(self.identity, self.pid, self.session, self.steps, max(step, -1), max(wall, 0.0),
                                 self.seconds)
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self.sock.setblocking(False)
            self.sock.sendto(stepfeed.encode(report), self.path)
            self.sent += 1
        except OSError:     # no agent (no such socket, refused), or its receive buffer full: never wait
            self.dropped += 1

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class _Off:
    """``LOCKSTEP_STEPS=0``."""

    steps = sent = dropped = 0

    def start(self) -> None:
        pass

    def end(self, step: Any = None) -> None:
        pass

    def send(self, now: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass


_feed: Feed | _Off | None = None


def configure(env: Mapping[str, str] | None = None, socket_path: str | None = None,
              interval: float | None = None) -> Feed | _Off:
    """Start (or restart) the feed: where to send, how often, and the environment to read the rank from
    (default ``os.environ``). ``step_end()`` calls it with no arguments the first time."""
    global _feed
    if _feed is not None:
        _feed.close()
    env = os.environ if env is None else env
    _feed = _Off() if env.get(stepfeed.ENV_ENABLE, "").strip() == "0" else Feed(env, socket_path, interval)
    return _feed


def step_end(step: Any = None) -> None:
    """One training step ended on this rank; ``step``: its number, where the loop has one."""
    feed = _feed
    if feed is None:
        feed = configure()
    feed.end(step)


def train_start() -> None:
    """The training loop starts (or resumes after an evaluation or a checkpoint) on this rank: the first step
    that ends next is timed from now. Without it a process's first step counts and is not timed (nothing marks
    when it began); the callbacks call it for you."""
    feed = _feed
    if feed is None:
        feed = configure()
    feed.start()


def stats() -> dict[str, int]:
    """This process's steps, datagrams sent and datagrams dropped (no agent, or its buffer full)."""
    feed = _feed
    return {"steps": feed.steps, "sent": feed.sent, "dropped": feed.dropped} if feed else \
        {"steps": 0, "sent": 0, "dropped": 0}


def _flush() -> None:
    if _feed is not None:
        _feed.send()


def _forget() -> None:
    """A forked child is another process: it starts its own feed if it reports steps."""
    global _feed
    _feed = None


atexit.register(_flush)
os.register_at_fork(after_in_child=_forget)


def _lightning_callback() -> type:
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        from pytorch_lightning.callbacks import Callback

    class LightningCallback(Callback):
        """Reports a step end after each optimizer step (``trainer.global_step`` moved; with gradient
        accumulation, not after every batch), with the step number."""

        def __init__(self) -> None:
            super().__init__()
            self._last: int | None = None

        def on_train_start(self, trainer, pl_module) -> None:
            self._last = trainer.global_step
            train_start()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if trainer.global_step != self._last:
                self._last = trainer.global_step
                step_end(trainer.global_step)

    return LightningCallback


def _huggingface_callback() -> type:
    from transformers import TrainerCallback

    class HuggingFaceCallback(TrainerCallback):
        """Reports a step end at each of ``Trainer``'s ``on_step_end`` (after the optimizer step), with
        ``state.global_step``."""

        def on_train_begin(self, args, state, control, **kwargs):
            train_start()

        def on_step_end(self, args, state, control, **kwargs):
            step_end(state.global_step)

    return HuggingFaceCallback


_LAZY = {"LightningCallback": _lightning_callback, "HuggingFaceCallback": _huggingface_callback}


def __getattr__(name: str) -> type:
    """The callbacks, built (their framework imported) when first named."""
    if name in _LAZY:
        cls = globals()[name] = _LAZY[name]()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
