"""The step feed from the training side (``lockstep.training``, format ``lockstep.exporters.catalog.stepfeed``): who a
rank is from its environment, reports that survive the wire and refuse anything else, ``step_end()`` never waiting
whether the agent is gone or too slow to read, nothing imported that training does not need, and the Lightning and
Hugging Face callbacks (on stand-in framework modules: neither framework is installed here)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep import training
from lockstep.exporters.catalog import stepfeed

UUID = "GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001"


@pytest.fixture
def short_dir():
    """A directory whose socket paths stay under the 108 bytes a UNIX socket name may have."""
    path = Path(tempfile.mkdtemp(prefix="steps", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def receiver(short_dir):
    """A bound socket standing in for the agent: ``(path, socket)``; nothing reads it unless the test does."""
    path = short_dir / "steps.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    yield path, sock
    sock.close()


@pytest.fixture(autouse=True)
def _fresh_feed():
    yield
    training._feed and training._feed.close()
    training._feed = None


@pytest.mark.parametrize("env,expected", [
    ({"RANK": "9", "LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": f"GPU-a,{UUID}", "SLURM_JOB_ID": "4242"},
     ("4242", "9", "1", UUID)),                                      # torchrun under srun, UUIDs visible
    ({"SLURM_PROCID": "17", "SLURM_LOCALID": "3", "SLURM_JOB_ID": "88", "CUDA_VISIBLE_DEVICES": "3"},
     ("88", "17", "3", "3")),                                        # srun, one GPU bound per task
    ({"RANK": "2", "LOCAL_RANK": "2"}, ("", "2", "2", "2")),          # all GPUs visible: cuda:LOCAL_RANK
    ({"RANK": "2", "LOCAL_RANK": "5", "CUDA_VISIBLE_DEVICES": "0,1"}, ("", "2", "5", "")),   # cannot say
    ({"RANK": "0", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": ""}, ("", "0", "0", "")),       # no GPU visible
    ({"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "LOCKSTEP_GPU": "MIG-x", "LOCKSTEP_JOB_ID": "a/b",
      "SLURM_JOB_ID": "1"}, ("a/b", "4", "0", "MIG-x")),
    ({}, ("", "", "", "")),
])
def test_who_a_rank_is_comes_from_its_environment(env, expected):
    i = stepfeed.identity(env)
    assert (i.job, i.rank, i.local_rank, i.gpu) == expected


def report(**kw) -> stepfeed.Report:
    base = dict(identity=stepfeed.Identity("4242", "17", "1", UUID), pid=123, session="ab12", steps=10, step=9,
                end=1767225600.25, seconds=13.5)
    return stepfeed.Report(**(base | kw))


def test_a_report_survives_the_wire():
    r = report()
    assert stepfeed.decode(stepfeed.encode(r)) == r
    assert len(stepfeed.encode(report(identity=stepfeed.Identity(*["x" * 128] * 4)))) <= stepfeed.MAX_DATAGRAM


@pytest.mark.parametrize("edit", [
    lambda d: d.update(v=2), lambda d: d.pop("steps"), lambda d: d.update(steps=-1), lambda d: d.update(steps=1.5),
    lambda d: d.update(steps=True), lambda d: d.update(end=float("nan")), lambda d: d.update(end="now"),
    lambda d: d.update(rank=3), lambda d: d.update(job="x" * 129), lambda d: d.update(gpu="a\nb"),
    lambda d: d.update(session=""), lambda d: d.update(step=-2), lambda d: d.update(seconds=-0.5),
], ids=range(13))
def test_anything_else_is_refused(edit):
    doc = json.loads(stepfeed.encode(report()))
    edit(doc)
    with pytest.raises(ValueError):
        stepfeed.decode(json.dumps(doc).encode())


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=1200))
def test_any_datagram_is_a_report_or_a_value_error(data):
    try:
        stepfeed.decode(data)
    except ValueError:
        pass


def calls_take(n: int, timeout: float = 20.0) -> float:
    """Seconds for ``n`` step_end() calls, run in a thread so that a call that blocks fails the test."""
    took: list[float] = []

    def run() -> None:
        started = time.perf_counter()
        for i in range(n):
            training.step_end(i)
        took.append(time.perf_counter() - started)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    assert took, f"{n} step_end() calls did not return within {timeout} s: a call blocked"
    return took[0]


def test_with_no_agent_every_call_returns_at_once_and_the_reports_are_counted_as_dropped(short_dir):
    training.configure(env={"RANK": "0"}, socket_path=str(short_dir / "no-agent.sock"), interval=0)
    took = calls_take(2000)
    assert training.stats() == {"steps": 2000, "sent": 0, "dropped": 2000}
    assert took / 2000 < 200e-6      # a report attempted on every call here; once a second by default


def test_an_agent_that_never_reads_cannot_make_a_call_wait(receiver):
    path, _ = receiver                                      # bound, never read: its buffer fills
    training.configure(env={"RANK": "0"}, socket_path=str(path), interval=0)
    calls_take(20000)
    stats = training.stats()
    assert stats["steps"] == 20000 and stats["sent"] > 0 and stats["dropped"] > 0
    assert stats["sent"] + stats["dropped"] == 20000


def test_reports_carry_cumulative_totals_at_most_once_an_interval(receiver):
    path, sock = receiver
    training.configure(env={"RANK": "5", "LOCAL_RANK": "1", "SLURM_JOB_ID": "4242", "CUDA_VISIBLE_DEVICES": UUID},
                       socket_path=str(path), interval=3600)
    for step in range(100, 110):
        training.step_end(step)
        time.sleep(0.002)
    first = stepfeed.decode(sock.recv(4096))           # the first call reports at once, then not for an hour
    assert (first.steps, first.step, first.seconds) == (1, 100, 0.0)
    sock.settimeout(0.1)
    with pytest.raises(socket.timeout):
        sock.recv(4096)
    training._flush()                                      # what atexit sends
    last = stepfeed.decode(sock.recv(4096))
    assert (last.steps, last.step, last.identity) == (10, 109, stepfeed.Identity("4242", "5", "1", UUID))
    assert 9 * 0.002 <= last.seconds < 5 and abs(last.end - time.time()) < 5
    assert (last.pid, last.session) == (os.getpid(), first.session)


def test_off_means_nothing_is_done(receiver):
    training.configure(env={"LOCKSTEP_STEPS": "0"}, socket_path=str(receiver[0]), interval=0)
    training.step_end()
    assert training.stats() == {"steps": 0, "sent": 0, "dropped": 0}


@pytest.mark.integration
def test_importing_the_feed_imports_no_framework_and_nothing_heavy():
    code = ("import sys, lockstep.training as t; t.step_end(); "
            "print(sorted(m for m in ('torch', 'lightning', 'pytorch_lightning', 'transformers', 'numpy', 'aiohttp', "
            "'pynvml', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=os.environ | {"LOCKSTEP_STEPS_SOCKET": "/nonexistent/steps.sock"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.fixture
def frameworks(monkeypatch):
    """Stand-ins for ``lightning.pytorch.callbacks.Callback`` and ``transformers.TrainerCallback``."""
    class Base:
        def __init__(self, *args, **kwargs) -> None:
            pass

    modules = {}
    for dotted, attr in (("lightning", None), ("lightning.pytorch", None), ("lightning.pytorch.callbacks", "Callback"),
                         ("transformers", "TrainerCallback")):
        module = types.ModuleType(dotted)
        if attr:
            setattr(module, attr, type(attr, (Base,), {}))
        modules[dotted] = module
        monkeypatch.setitem(sys.modules, dotted, module)
    for name in ("LightningCallback", "HuggingFaceCallback"):
        monkeypatch.delitem(training.__dict__, name, raising=False)
    return modules


def test_the_lightning_callback_reports_each_optimizer_step_not_each_batch(frameworks, receiver):
    path, sock = receiver
    training.configure(env={"RANK": "0"}, socket_path=str(path), interval=0)
    callback = training.LightningCallback()
    assert isinstance(callback, frameworks["lightning.pytorch.callbacks"].Callback)
    trainer = types.SimpleNamespace(global_step=40)
    callback.on_train_start(trainer, None)
    for batch in range(8):                                   # gradient accumulation over 4 batches
        trainer.global_step = 40 + (batch + 1) // 4
        callback.on_train_batch_end(trainer, None, None, None, batch)
    reports = [stepfeed.decode(sock.recv(4096)) for _ in range(3)]
    assert [(r.steps, r.step) for r in reports] == [(0, -1), (1, 41), (2, 42)]   # the loop's start, then each step
    assert reports[1].seconds > 0                                                 # the first step is timed


def test_train_start_times_the_first_step_and_counts_none(receiver):
    path, sock = receiver
    feed = training.Feed({"RANK": "3"}, str(path), interval=0)
    feed.start(_clock=lambda: 100.0)
    feed.end(1, _clock=lambda: 102.5)
    start, first = (stepfeed.decode(sock.recv(4096)) for _ in range(2))
    assert (start.steps, start.seconds) == (0, 0.0)
    assert (first.steps, first.step, first.seconds) == (1, 1, 2.5)
    untimed = training.Feed({"RANK": "3"}, str(path), interval=0)    # no start: the first step counts, untimed
    untimed.end(1, _clock=lambda: 102.5)
    assert (lambda r: (r.steps, r.seconds))(stepfeed.decode(sock.recv(4096))) == (1, 0.0)
    feed.close()
    untimed.close()


def test_the_hugging_face_callback_reports_on_step_end(frameworks, receiver):
    path, sock = receiver
    training.configure(env={"RANK": "0"}, socket_path=str(path), interval=0)
    callback = training.HuggingFaceCallback()
    assert isinstance(callback, frameworks["transformers"].TrainerCallback)
    callback.on_train_begin(None, types.SimpleNamespace(global_step=6), None, model=None)
    callback.on_step_end(None, types.SimpleNamespace(global_step=7), None, model=None)
    start, step = (stepfeed.decode(sock.recv(4096)) for _ in range(2))
    assert (start.steps, step.steps, step.step) == (0, 1, 7) and step.seconds > 0


def test_a_name_the_module_lacks_is_an_attribute_error():
    with pytest.raises(AttributeError):
        training.NoSuchCallback  # noqa: B018 (the attribute access is the test)
