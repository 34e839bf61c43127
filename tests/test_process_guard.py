"""The guard of the ``integration`` marker itself (tests/helpers/processes.py, applied by tests/conftest.py
to every test without the marker): each way of starting a process is refused and recorded, also where the
caller catches the refusal, and everything is put back afterwards."""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import subprocess

import pytest

from tests.helpers.processes import SPAWNS, ProcessRefused, processes_refused


def _asyncio_subprocess() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")

    asyncio.run(start())


def _multiprocessing_spawn() -> None:
    multiprocessing.get_context("spawn").Process(target=print).start()


def _fork() -> None:
    if os.fork() == 0:
        os._exit(0)


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"]), lambda: subprocess.check_output(["true"]), lambda: os.popen("true"),
    lambda: os.system("true"), _asyncio_subprocess, _multiprocessing_spawn, _fork,
    lambda: os.posix_spawn("/bin/true", ["true"], {}), lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"]),
], ids=["subprocess.run", "check_output", "os.popen", "os.system", "asyncio", "multiprocessing", "os.fork",
        "os.posix_spawn", "os.spawnv"])
def test_every_way_of_starting_a_process_is_refused_and_recorded(start):
    with processes_refused("this test") as started:
        with pytest.raises(ProcessRefused, match="this test started a process"):
            start()
    assert len(started) == 1


def test_a_refusal_the_caller_swallows_is_still_recorded():
    with processes_refused("this test") as started:
        try:
            subprocess.run(["true"])
        except Exception:
            pass
    assert started == ["subprocess.Popen._execute_child(['true'])"]


def test_a_stand_in_pickles_by_name_like_the_call_it_stands_for():
    """A pickle naming os.system (as the hostile Flight Recorder dumps do) still pickles, and loading it
    gives the stand-in, which refuses."""
    with processes_refused("this test") as started:
        payload = pickle.dumps(os.system)
        with pytest.raises(ProcessRefused):
            pickle.loads(payload)("true")
    assert pickle.loads(payload) is os.system and started == ["os.system('true')"]


def test_everything_is_put_back():
    before = [owner.__dict__.get(name) for owner, name in SPAWNS]
    with processes_refused("this test"):
        assert [owner.__dict__.get(name) for owner, name in SPAWNS] != before
    assert [owner.__dict__.get(name) for owner, name in SPAWNS] == before
