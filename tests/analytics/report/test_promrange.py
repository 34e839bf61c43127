"""``promrange.fetch`` against an HTTP server that is not (quite) Prometheus: a clear PrometheusError,
never a JSON or KeyError traceback out of ``lockstep report``; the matrix decoder on any JSON."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.analytics.prom.errors import PrometheusError
from lockstep.analytics.report.client import PromClient
from lockstep.analytics.report.promrange import RangeQuery, fetch, parse_matrix


def _serve(body: bytes, content_type: str, status: int = 200):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits for the serving loop to look (half a second by default)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    return server


@pytest.mark.parametrize("body,ctype", [
    (b"<html><body>Grafana</body></html>", "text/html"),        # --prometheus-url pointed at the wrong service
    (b'{"status": "success"}', "application/json"),               # JSON, but no data.result
    (b'[1, 2, 3]', "application/json"),
])
def test_a_non_prometheus_answer_is_a_prometheus_error(body, ctype):
    server = _serve(body, ctype)
    try:
        with PromClient(f"http://127.0.0.1:{server.server_address[1]}") as client:
            with pytest.raises(PrometheusError, match="127.0.0.1"):
                fetch(client, RangeQuery("q", "up", 60.0), 0.0, 600.0, timeout=5)
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


def _matrix(*series: dict) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(series)}}).encode()


GOOD = {"metric": {"__name__": "up"}, "values": [[1700000000, "1"], [1700000060, "NaN"]]}
MALFORMED = {
    "no data": b'{"status": "success"}',
    "data not an object": b'{"status": "success", "data": [1]}',
    "non-numeric value": _matrix(GOOD, {"metric": {}, "values": [[1700000000, "lots"]]}),
    "1-D values": _matrix({"metric": {}, "values": [1700000000, "1"]}),
    "labels not strings": _matrix({"metric": {"node": {"deep": 1}}, "values": []}),
    "nested too deeply": b"[" * 100_000 + b"]" * 100_000,
    "an error without a message": b'{"status": "error"}',
    "HTML": b"<html>Grafana</html>",
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_report_monthly_on_a_malformed_answer_is_one_line_and_exit_1(tmp_path, capsys, body):
    from lockstep.cli import main

    server = _serve(body, "application/json")
    try:
        code = main(["report", "monthly", "--prometheus-url", f"http://127.0.0.1:{server.server_address[1]}",
                     "--month", "2026-10", "--out", str(tmp_path / "out")])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("lockstep report:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "127.0.0.1" in lines[0] and not (tmp_path / "out").exists()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10)
POINT = st.one_of(st.tuples(st.integers(0, 2**40) | st.floats(), st.text(max_size=6) | st.sampled_from(["1", "NaN"]))
                  .map(list), JSON)
SERIES = st.one_of(st.fixed_dictionaries({"metric": st.dictionaries(st.text(max_size=6), st.text(max_size=6) | JSON,
                                                                    max_size=3),
                                          "values": st.lists(POINT, max_size=3) | JSON}), JSON)
ANSWER = st.one_of(JSON, st.lists(SERIES, max_size=4).map(lambda r: {"status": "success", "data": {"result": r}}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANSWER)
def test_the_matrix_decoder_raises_only_prometheus_error(payload):
    try:
        frame = parse_matrix(payload)
    except PrometheusError:
        return
    points = sum(len(s["values"]) for s in payload["data"]["result"])
    assert len(frame) == points
