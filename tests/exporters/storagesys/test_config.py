"""The storage exporter's config: errors name file, line and key; the bearer token and the passwords are read from
their files and never printed; WEKA's login (username, password_file, org) is required for it and org refused for
the others; a part a target opts in to (VAST's views, WEKA's per_host and per_filesystem) is off by default and
refused on other kinds."""
from __future__ import annotations

import pytest

from lockstep.exporters.storagesys.config import ConfigError, load_config


def write(tmp_path, text: str):
    path = tmp_path / "storage.yaml"
    path.write_text(text)
    return path


def test_a_valid_config_reads_the_token_file(tmp_path):
    (tmp_path / "s3.token").write_text("eyJ-secret-jwt\n")
    cfg = load_config(write(tmp_path, "interval_s: 20\ntargets:\n  - name: s3\n    kind: minio\n"
                                      "    url: https://minio.example:9000\n    bearer_token_file: s3.token\n"))
    assert cfg.interval_s == 20 and cfg.targets[0].bearer_token == "eyJ-secret-jwt"
    assert "eyJ-secret-jwt" not in repr(cfg)


def test_vast_reads_basic_auth_from_a_username_and_a_password_file(tmp_path):
    (tmp_path / "vms.password").write_text("s3cr3t-vms\n")
    cfg = load_config(write(tmp_path, "targets:\n  - name: vast-a\n    kind: vast\n    url: https://vms.example\n"
                                      "    username: lockstep-ro\n    password_file: vms.password\n"))
    target = cfg.targets[0]
    assert target.kind == "vast" and target.basic_auth.username == "lockstep-ro"
    assert target.basic_auth.password == "s3cr3t-vms" and target.bearer_token is None
    assert "s3cr3t-vms" not in repr(cfg)


def test_a_token_and_basic_auth_together_are_refused(tmp_path):
    (tmp_path / "t").write_text("tok\n")
    (tmp_path / "p").write_text("pw\n")
    path = write(tmp_path, "targets:\n  - name: a\n    kind: vast\n    url: https://h\n    bearer_token_file: t\n"
                           "    username: u\n    password_file: p\n")
    with pytest.raises(ConfigError, match=r":6: targets\[0\].username: give bearer_token_file or username"):
        load_config(path)


def test_weka_logs_in_with_a_username_a_password_file_and_an_optional_org(tmp_path):
    (tmp_path / "weka.password").write_text("w3ka-s3cret\n")
    cfg = load_config(write(tmp_path, "targets:\n  - name: weka-a\n    kind: weka\n    url: https://weka01:14000\n"
                                      "    username: lockstep-ro\n    password_file: weka.password\n    org: research\n"
                                      "  - name: weka-b\n    kind: weka\n    url: https://weka02:14000\n"
                                      "    username: lockstep-ro\n    password_file: weka.password\n"))
    a, b = cfg.targets
    assert (a.kind, a.url, a.org, a.basic_auth.username, a.basic_auth.password) == (
        "weka", "https://weka01:14000", "research", "lockstep-ro", "w3ka-s3cret")
    assert b.org is None and b.bearer_token is None
    assert "w3ka-s3cret" not in repr(cfg)


def test_ceph_rgw_is_a_kind_read(tmp_path):
    cfg = load_config(write(tmp_path, "targets:\n  - name: rgw-a\n    kind: ceph-rgw\n    url: http://ceph-a:9926\n"))
    assert cfg.targets[0].kind == "ceph-rgw" and cfg.targets[0].bearer_token is None


@pytest.mark.parametrize(("body", "where"), [
    ("targets:\n  - name: a\n    kind: lustre\n    url: http://h\n", ":3: targets[0].kind"),
    ("targets:\n  - name: a\n    kind: weka\n    url: https://h:14000\n", ":2: targets[0].username: weka needs username "
     "and password_file"),
    ("targets:\n  - name: a\n    kind: weka\n    url: https://h:14000\n    username: ro\n",
     ":2: targets[0].password_file: basic auth needs both"),
    ("targets:\n  - name: a\n    kind: weka\n    url: https://h:14000\n    bearer_token_file: t\n",
     ":5: targets[0].bearer_token_file: weka logs in with username and password_file"),
    ("targets:\n  - name: a\n    kind: weka\n    url: https://h:14000/api/v1\n", ":4: targets[0].url: give the system's address"),
    ("targets:\n  - name: a\n    kind: minio\n    url: http://h\n    org: research\n", ":5: targets[0].org: only for kind weka"),
    ("targets:\n  - name: a\n    kind: weka\n    url: https://h\n    username: ro\n    password_file: t\n    org: ' '\n",
     ":7: targets[0].org: must not be empty"),
    ("targets:\n  - name: a\n    kind: vast\n    url: https://h\n    username: ro\n", ":2: targets[0].password_file: "
     "basic auth needs both"),
    ("targets:\n  - name: a\n    kind: vast\n    url: https://h\n    password_file: nope\n",
     ":5: targets[0].password_file: cannot read nope"),
    ("targets:\n  - name: a\n    kind: vast\n    url: https://h\n    username: ''\n", ":5: targets[0].username"),
    ("targets:\n  - name: a\n    kind: minio\n    url: http://u:p@h\n", ":4: targets[0].url"),
    ("targets:\n  - name: a\n    kind: minio\n    url: http://h/minio/v2/metrics/bucket\n", ":4: targets[0].url"),
    ("targets:\n  - name: a\n    kind: minio\n    url: http://h\n    bearer_token_file: nope\n",
     ":5: targets[0].bearer_token_file: cannot read nope"),
    ("targets:\n  - name: a\n    kind: minio\n    url: http://h\n    colour: red\n", "targets[0].colour"),
    ("targets:\n  - {name: a, kind: minio, url: 'http://h'}\n  - {name: a, kind: minio, url: 'http://i'}\n",
     ":3: targets[1].name: duplicate"),
    ("interval_s: 5\ntimeout_s: 10\ntargets:\n  - {name: a, kind: minio, url: 'http://h'}\n", ":2: timeout_s"),
    ("targets: []\n", "targets"),
])
def test_errors_name_file_line_and_key(tmp_path, body, where):
    (tmp_path / "t").write_text("secret\n")
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(str(path)) and where in str(err.value)


# The parts a target of one kind may opt in to: (option, its kind, the login that kind needs)
PARTS = (("views", "vast", "    username: ro\n    password_file: pw\n"),
         ("per_host", "weka", "    username: ro\n    password_file: pw\n"),
         ("per_filesystem", "weka", "    username: ro\n    password_file: pw\n"))


@pytest.mark.parametrize(("option", "kind", "login"), PARTS)
def test_a_part_is_off_unless_a_target_of_its_kind_asks(tmp_path, option, kind, login):
    (tmp_path / "pw").write_text("secret\n")
    cfg = load_config(write(tmp_path, f"targets:\n  - name: a\n    kind: {kind}\n    url: https://a\n{login}"
                                      f"    {option}: true\n  - name: b\n    kind: {kind}\n    url: https://b\n{login}"))
    assert [getattr(t, option) for t in cfg.targets] == [True, False]


@pytest.mark.parametrize(("option", "kind", "login"), PARTS)
@pytest.mark.parametrize(("other", "setting", "where"), [
    ("minio", "true", ":5: targets[0].{option}: only for kind {kind}"),
    ("ceph-rgw", "false", ":5: targets[0].{option}: only for kind {kind}"),
    (None, "'true'", ":7: targets[0].{option}: must be bool, got str 'true'"),
])
def test_a_part_option_errors_name_file_line_and_key(tmp_path, option, kind, login, other, setting, where):
    (tmp_path / "pw").write_text("secret\n")
    body = (f"targets:\n  - name: a\n    kind: {other}\n    url: http://h\n" if other else
            f"targets:\n  - name: a\n    kind: {kind}\n    url: https://h\n{login}") + f"    {option}: {setting}\n"
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:") and where.format(option=option, kind=kind) in str(err.value)
