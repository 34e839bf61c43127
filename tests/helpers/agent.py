"""A real node agent for the tests: ``lockstep exporter`` serving a simulated node."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from lockstep import stack


def start_exporter(node_root: Path, workdir: Path, *flags: str, ready: bool = True) -> stack.Service:
    """``lockstep exporter --sim.node-root NODE`` on a free 127.0.0.1 port, ready once /metrics answers
    (``ready=False``: once it listens, for an agent that answers 401 without credentials)."""
    service = stack.start_on_port("lockstep-exporter", lambda port: [
        str(Path(sys.executable).parent / "lockstep"), "exporter", f"--sim.node-root={node_root}",
        f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults", "--collector.gpu", *flags],
        workdir, ready_path="/metrics" if ready else None, timeout=30)
    deadline = time.monotonic() + 30
    while not ready and time.monotonic() < deadline:
        try:
            stack.http_get(service.url + "/metrics", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    return service
