"""The demo's pager: an Alertmanager webhook receiver (``POST /pager``, ``POST /queue``) that prints
each notification to the terminal and appends it to ``pages.jsonl`` (the demo test reads that file).

Payload: Alertmanager's webhook format (version 4): ``{"status", "receiver", "alerts": [{"status",
"labels", "annotations", "startsAt", ...}], ...}``.
"""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, TextIO


def format_notification(kind: str, payload: dict, seen: set | None = None) -> list[str]:
    """One terminal line per alert in an Alertmanager webhook payload. Alertmanager resends the whole
    group whenever it changes; with ``seen``, an alert already printed in the same state is skipped."""
    lines = []
    for alert in payload.get("alerts", []):
        key = (alert.get("fingerprint"), alert.get("status"), alert.get("startsAt"))
        if seen is not None:
            if key in seen:
                continue
            seen.add(key)
        labels = alert.get("labels", {})
        where = " ".join(f"{k}={labels[k]}" for k in ("node", "gpu", "interface", "job_id", "rack") if k in labels)
        summary = alert.get("annotations", {}).get("summary", "")
        state = "RESOLVED" if alert.get("status") == "resolved" else kind.upper()
        lines.append(f"{state:8s} {labels.get('alertname', '?')} [{labels.get('severity', '?')}] {where} {summary}".rstrip())
    return lines


def _handler(log_path: Path, emit: Callable[[str], None], lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    seen: set = set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            kind = self.path.strip("/") or "page"
            try:
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError:
                self.send_error(400, "body is not JSON")
                return
            with lock:
                with open(log_path, "a") as fh:
                    fh.write(json.dumps({"receiver": kind, "payload": payload}) + "\n")
                for line in format_notification("page" if kind == "pager" else "ticket", payload, seen):
                    emit(line)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:  # requests are already printed as alerts
            pass

    return Handler


class Pager:
    """Serves on 127.0.0.1:``port`` in a daemon thread until ``stop()``."""

    def __init__(self, port: int, log_path: Path, out: TextIO = sys.stdout) -> None:
        emit = lambda line: print(f"  >> {line}", file=out, flush=True)  # noqa: E731
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(log_path, emit, threading.Lock()))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="demo-pager", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
