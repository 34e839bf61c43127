"""Fixtures of the alerts' tests: a fake ``scontrol`` for the quarantine receiver."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest


@pytest.fixture
def scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fake ``scontrol`` first on PATH; returns a function giving the argv lists it was called with."""
    log = tmp_path / "scontrol.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                      f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                      f"open({str(tmp_path / 'scontrol.pids')!r}, 'a').write(str(os.getpid()) + '\\n')\n"
                      "import time; time.sleep(float(os.environ.get('FAKE_SCONTROL_SLEEP', '0')))\n"
                      "sys.exit(int(os.environ.get('FAKE_SCONTROL_RC', '0')))\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
