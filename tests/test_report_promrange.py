"""``promrange.fetch`` against an HTTP server that is not (quite) Prometheus: a clear PrometheusError,
never a JSON or KeyError traceback out of ``lockstep report``."""
from __future__ import annotations

import http.server
import threading

import pytest

from analytics.report.promrange import PrometheusError, RangeQuery, fetch


def _serve(body: bytes, content_type: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("body,ctype", [
    (b"<html><body>Grafana</body></html>", "text/html"),        # --prometheus-url pointed at the wrong service
    (b'{"status": "success"}', "application/json"),               # JSON, but no data.result
    (b'[1, 2, 3]', "application/json"),
])
def test_a_non_prometheus_answer_is_a_prometheus_error(body, ctype):
    server = _serve(body, ctype)
    try:
        with pytest.raises(PrometheusError, match="127.0.0.1"):
            fetch(f"http://127.0.0.1:{server.server_address[1]}", RangeQuery("q", "up", 60.0), 0.0, 600.0, timeout=5)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("flag", ["--step", "--fine-step"])
@pytest.mark.parametrize("value", ["inf", "nan", "0"])
def test_non_finite_steps_are_exit_2_before_any_query(tmp_path, capsys, flag, value):
    from lockstep.cli import main

    # port 9 (discard) is never queried: the flags are checked first
    args = ["report", "monthly", "--prometheus-url", "http://127.0.0.1:9", "--month", "2026-10",
            "--out", str(tmp_path / "out"), flag, value]
    assert main(args) == 2
    assert "--step and --fine-step" in capsys.readouterr().err
