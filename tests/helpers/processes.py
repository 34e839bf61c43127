"""The guard of the ``integration`` marker (tests/conftest.py runs every test not marked ``integration``
inside ``processes_refused``): starting a process there is refused and recorded."""
from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import subprocess

# Every way Python starts a process ends in one of these: subprocess.Popen (asyncio's subprocesses too)
# in its _execute_child, whether it forks or posix_spawns; multiprocessing's spawn and forkserver in
# _posixsubprocess.fork_exec, its fork and os.spawn* in os.fork; os.posix_spawn and os.system called
# directly.
SPAWNS = ((subprocess.Popen, "_execute_child"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "forkpty"),
          (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"))


class ProcessRefused(RuntimeError):
    """A test without the ``integration`` marker tried to start a process."""


@contextlib.contextmanager
def processes_refused(who: str):
    """Within, every way of starting a process raises ``ProcessRefused`` naming ``who`` and what it
    would have run, and is recorded in the list it yields (recorded even where the caller catches it)."""
    started: list[str] = []
    saved = [(owner, name, owner.__dict__[name]) for owner, name in SPAWNS if name in owner.__dict__]

    def refuse(owner, name: str):
        module = owner.__module__ if isinstance(owner, type) else owner.__name__
        qualname = f"{owner.__qualname__}.{name}" if isinstance(owner, type) else name

        def refused(*args, **kwargs):
            started.append(f"{module}.{qualname}({_command(name, args)})")
            raise ProcessRefused(f"{who} started a process ({started[-1]}) without the integration marker")

        # where it stands in for the real call, pickle finds it by the real call's module and name
        refused.__module__, refused.__name__, refused.__qualname__ = module, name, qualname
        return refused

    for owner, name, _ in saved:
        setattr(owner, name, refuse(owner, name))
    try:
        yield started
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def _command(name: str, args: tuple) -> str:
    """What was to run, as far as the call says: the argv of Popen, fork_exec and posix_spawn, the shell
    command of os.system."""
    if name == "_execute_child" and len(args) > 1:
        return repr(args[1])
    if name in ("fork_exec", "system", "posix_spawn", "posix_spawnp") and args:
        return repr(args[1] if name.startswith("posix_spawn") and len(args) > 1 else args[0])
    return ""
