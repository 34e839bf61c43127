"""Every HTTP service lockstep runs holds its connections to the same deadlines (exporters/toolkit/conntimeouts.py):
each real process below, started as a user would, closes a silent connection at its idle timeout and a
never-finished request header at its header timeout, and still answers a whole request. Plus the event
loop's error reports, rate-limited (exporters/toolkit/looperrors.py)."""
from __future__ import annotations

import argparse
import logging

import pytest

from tests.helpers.stalled import HEADER, Process, closed_by_peer, connect, get, until


def power(tmp_path, refused_port) -> tuple[list[str], str]:
    config = tmp_path / "power.yaml"
    config.write_text(f"interval_s: 30\ntimeout_s: 0.5\ntargets:\n  - name: bmc1\n    kind: bmc\n"
                      f"    url: http://127.0.0.1:{refused_port}\n    rack: r1\n")
    return ["power-exporter", f"--config={config}", "--no-background"], "/metrics"


def analytics(tmp_path, refused_port) -> tuple[list[str], str]:
    return ["analytics", "serve", f"--prometheus-url=http://127.0.0.1:{refused_port}"], "/-/healthy"


def quarantine(tmp_path, refused_port) -> tuple[list[str], str]:
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    return ["alerts", "quarantine-receiver", f"--token-file={token}"], "/-/healthy"


def agent(tmp_path, refused_port) -> tuple[list[str], str]:
    return ["exporter", "--collector.disable-defaults"], "/metrics"


@pytest.mark.integration
@pytest.mark.parametrize("service", [agent, power, analytics, quarantine])
def test_each_service_closes_stalled_connections_and_answers(service, tmp_path, refused_port):
    """Before: every one of them kept such connections for aiohttp's default of an hour (3,630 s)."""
    args, path = service(tmp_path, refused_port)
    process = Process([*args, "--web.idle-timeout=1", "--web.read-header-timeout=1"], tmp_path / "service.log")
    try:
        silent, partial = connect(process.port), connect(process.port, HEADER)
        until(lambda: closed_by_peer(silent) and closed_by_peer(partial), 30,
              f"lockstep {args[0]} closes the silent and the unfinished connection")
        assert get(process.port, path)[0] == 200
    finally:
        process.stop()


def test_a_bad_timeout_is_refused_naming_the_flag():
    from lockstep.exporters.toolkit.conntimeouts import add_flags, from_args

    parser = argparse.ArgumentParser()
    add_flags(parser)
    for value in ("0", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="--web.idle-timeout"):
            from_args(parser.parse_args([f"--web.idle-timeout={value}"]))


def test_loop_errors_are_logged_once_then_once_per_interval_with_a_count(caplog):
    import asyncio

    from lockstep.exporters.toolkit.looperrors import LoopErrorLimiter

    now = [0.0]
    limiter = LoopErrorLimiter(10.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for i in range(1000):   # a thousand failed accepts over 25 s
                now[0] = i * 0.025
                limiter(loop, {"message": "socket.accept() out of system resource", "exception": OSError(24, "x")})
            limiter(loop, {"message": "another error"})
    finally:
        loop.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4   # at 0 s, 10 s, 20 s, and the other kind
    assert "more like it" not in messages[0] and "(and 399 more like it in the last 10 s" in messages[1]
    assert messages[3].startswith("another error")


@pytest.mark.parametrize("unit", ["lockstep-exporter.service", "lockstep-power-exporter.service",
                                  "lockstep-analytics.service"])
def test_each_systemd_unit_lifts_the_open_files_limit(unit):
    """systemd's default soft limit is 1,024 descriptors, one per connection: a unit must set its own."""
    from tests.helpers.stalled import REPO

    lines = (REPO / "deploy" / "systemd" / unit).read_text().splitlines()
    limits = [int(line.split("=", 1)[1]) for line in lines if line.startswith("LimitNOFILE=")]
    assert limits and limits[0] >= 65536
