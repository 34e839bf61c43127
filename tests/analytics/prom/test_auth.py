"""The Prometheus client's authentication flags and session, without a Prometheus: what is refused at
start, where credentials go, and what is hidden. (Against a real Prometheus demanding TLS and basic
auth: tests/analytics/test_prometheus_auth.py.)"""
from __future__ import annotations

import argparse
import logging
import os

import pytest
from aiohttp import web

from lockstep.analytics.prom.auth import PromAuth, add_flags, auth_from_args, check_url, parse_header
from lockstep.analytics.prom.session import Credentials, CredentialsError, check_credentials, open_session
from lockstep.exporters.toolkit import logs


def _parse(*argv: str) -> PromAuth:
    p = argparse.ArgumentParser()
    add_flags(p)
    return auth_from_args(p.parse_args(["--prometheus-url", "https://prom:9090", *argv]))


@pytest.mark.parametrize("argv,message", [
    (["--prometheus-bearer-token-file", "t", "--prometheus-username", "u", "--prometheus-password-file", "p"],
     "mutually exclusive"),
    (["--prometheus-username", "u"], "needs both"),
    (["--prometheus-cert-file", "c"], "needs both"),
    (["--prometheus-header", "Authorization: Bearer abc"], "--prometheus-bearer-token-file"),
    (["--prometheus-header", "X-Scope-OrgID"], "expected 'Name: value'"),
    (["--prometheus-header", "Bad Name: x"], "expected 'Name: value'"),
])
def test_bad_flag_combinations_are_refused(argv, message):
    with pytest.raises(ValueError, match=message):
        _parse(*argv)


def test_headers_parse_like_curl():
    assert parse_header("X-Scope-OrgID:  tenant-a ") == ("X-Scope-OrgID", "tenant-a")
    assert _parse("--prometheus-header", "X-Scope-OrgID: a", "--prometheus-header", "X-Extra: b:c").headers == \
        (("X-Scope-OrgID", "a"), ("X-Extra", "b:c"))


@pytest.mark.parametrize("url", ["http://admin:hunter2@prom:9090", "https://hunter2@prom", "http://:hunter2@prom"])
def test_credentials_in_the_url_are_refused_without_echoing_them(url):
    with pytest.raises(ValueError) as err:
        check_url(url)
    assert "hunter2" not in str(err.value) and "--prometheus-password-file" in str(err.value)


def test_tls_flags_with_a_plain_http_url_are_refused():
    with pytest.raises(ValueError, match="use https://"):
        check_url("http://prom:9090", PromAuth(insecure_skip_verify=True))
    assert check_url("https://prom:9090/prefix", PromAuth(insecure_skip_verify=True))


@pytest.mark.parametrize("content,message", [("", "empty"), ("a\nb", "more than one line"), ("a\x00b", "control")])
def test_an_unusable_secret_file_is_named_not_shown(tmp_path, content, message):
    (tmp_path / "token").write_text(content)
    with pytest.raises(CredentialsError, match=message) as err:
        check_credentials(PromAuth(bearer_token_file=str(tmp_path / "token")))
    assert str(tmp_path / "token") in str(err.value) and (not content or content not in str(err.value))
    with pytest.raises(ValueError, match="cannot read"):
        check_credentials(PromAuth(bearer_token_file=str(tmp_path / "absent")))


def test_a_secret_file_is_read_again_only_when_it_changes(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("first\n")
    creds = Credentials(PromAuth(bearer_token_file=str(token)))
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert creds.headers() == [("Authorization", "Bearer first")]
    assert creds.headers() == [("Authorization", "Bearer first")]
    assert len(opened) == 1
    tmp = tmp_path / "new"
    tmp.write_text("second")
    os.replace(tmp, token)
    assert creds.headers() == [("Authorization", "Bearer second")]
    # both values are hidden, and the basic-auth encoding of a password too
    assert creds.redact("was first, now second") == "was <redacted>, now <redacted>"
    (tmp_path / "pw").write_text("s3cr3t-pw\n")
    basic = Credentials(PromAuth(username="u", password_file=str(tmp_path / "pw")))
    (_, value), = basic.headers()
    assert basic.redact(f"echo {value} s3cr3t-pw") == "echo Basic <redacted> <redacted>"


async def test_credentials_go_to_the_base_origin_only(aiohttp_server, tmp_path):
    """A Prometheus (or a proxy) that redirects elsewhere does not get our token sent there."""
    received = {}

    async def record(request: web.Request) -> web.Response:
        received[request.host] = request.headers.get("Authorization")
        return web.json_response({"status": "success", "data": {"result": []}})

    other = web.Application()
    other.router.add_get("/{p:.*}", record)
    elsewhere = await aiohttp_server(other)

    async def redirect(request: web.Request) -> web.Response:
        received[request.host] = request.headers.get("Authorization")
        raise web.HTTPFound(str(elsewhere.make_url("/api/v1/query")))

    home = web.Application()
    home.router.add_get("/{p:.*}", redirect)
    prom = await aiohttp_server(home)
    (tmp_path / "token").write_text("tok")
    base = str(prom.make_url("")).rstrip("/")
    async with open_session(base, PromAuth(bearer_token_file=str(tmp_path / "token"),
                                           headers=(("X-Scope-OrgID", "t"),))) as session:
        async with session.get(base + "/api/v1/query") as resp:
            assert resp.status == 200
    assert received == {f"{prom.host}:{prom.port}": "Bearer tok", f"{elsewhere.host}:{elsewhere.port}": None}


def test_log_lines_pass_through_the_redaction(tmp_path, capsys, monkeypatch):
    (tmp_path / "token").write_text("tok-in-a-log")
    creds = Credentials(PromAuth(bearer_token_file=str(tmp_path / "token")))
    creds.check()
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))   # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    logs.setup("info")
    logs.redact_with(creds.redact)
    logging.getLogger("lockstep.test").warning("upstream said %s", "bad token tok-in-a-log",
                                               extra=logs.kv(err="tok-in-a-log", url="http://u:p@h/"))
    err = capsys.readouterr().err
    assert "tok-in-a-log" not in err and "u:p@" not in err and err.count("<redacted>") == 3
