"""Config files are rejected with FILE:LINE: key: reason."""
import pytest

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of, positive


def write(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_wrong_type_names_file_line_and_key(tmp_path):
    path = write(tmp_path, "interval_s: 15\ntargets:\n  - name: a\n    kind: pdu\n    budget_watts: lots\n")
    top = Section(load_yaml(path), path)
    target = next(top.sections("targets"))
    target.get("name", str)
    target.get("kind", str, check=one_of("bmc", "pdu"))
    with pytest.raises(ConfigError) as err:
        target.get("budget_watts", float, check=positive)
    assert str(err.value) == f"{path}:5: targets[0].budget_watts: must be float, got str 'lots'"
    assert (err.value.line, err.value.key) == (5, "targets[0].budget_watts")


def test_unknown_key_is_an_error(tmp_path):
    path = write(tmp_path, "interval_s: 15\ntimeuot_s: 5\n")
    top = Section(load_yaml(path), path)
    top.get("interval_s", float)
    top.get("timeout_s", float, 5.0)
    with pytest.raises(ConfigError, match=r":2: timeuot_s: unknown key"):
        top.finish()


def test_missing_required_key(tmp_path):
    path = write(tmp_path, "a: 1\n")
    with pytest.raises(ConfigError, match="b: required key is missing"):
        Section(load_yaml(path), path).get("b", int)


def test_duplicate_key_and_syntax_error(tmp_path):
    with pytest.raises(ConfigError, match=r"c.yaml:3: a: duplicate key"):
        load_yaml(write(tmp_path, "a: 1\nb: 2\na: 3\n"))
    with pytest.raises(ConfigError, match=r"d.yaml:2: invalid YAML"):
        load_yaml(write(tmp_path, "a: [1, 2\nb: 3\n", "d.yaml"))


def test_check_and_unreadable_file(tmp_path):
    path = write(tmp_path, "kind: toaster\n")
    with pytest.raises(ConfigError, match="kind: must be one of bmc, pdu"):
        Section(load_yaml(path), path).get("kind", str, check=one_of("bmc", "pdu"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")


def test_bool_is_not_an_int(tmp_path):
    path = write(tmp_path, "port: true\n")
    with pytest.raises(ConfigError, match="must be int"):
        Section(load_yaml(path), path).get("port", int)
