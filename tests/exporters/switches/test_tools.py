"""The infiniband-diags runner on real processes: a tool past its deadline is killed and reported, and one
that left a process outside its group holding its output pipes does not hold the sweep with it."""
from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from lockstep.exporters.switches import tools

pytestmark = pytest.mark.integration

# Starts a child in a session of its own (out of reach of the kill of the tool's group) that inherits the
# tool's stdout and stderr, writes its pid where the test can end it, then hangs.
ESCAPING = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(300)
"""


def test_a_hanging_tool_is_killed_at_its_deadline():
    result = tools.run((sys.executable, "-c", "import time; time.sleep(300)"), 0.5)
    assert result.timed_out and result.returncode is None and not result.ok
    assert "timed out" in result.describe()


def test_a_tool_whose_escaped_child_holds_the_pipes_is_not_waited_for(tmp_path):
    pid_file = tmp_path / "child.pid"
    results: list[tools.ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(
        tools.run((sys.executable, "-c", ESCAPING, str(pid_file)), 5.0)), daemon=True)
    worker.start()
    try:
        worker.join(timeout=60)   # before the fix: as long as the escaped child lives (300 s)
        assert results, "tools.run still waiting on the pipes of a process outside the tool's group"
        assert results[0].timed_out and not results[0].ok
        assert pid_file.read_text(), "the tool was killed before its child escaped: nothing was tested"
    finally:
        if pid_file.exists() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
