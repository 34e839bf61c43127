"""YAML config files built to hurt (``lockstep.exporters.toolkit.configfile``, the one loader of every lockstep config):
alias bombs ("billion laughs") in a typed value, through the three commands that read one at start
(the power exporter's ``--config``, the node agent's ``--web.config.file``, ``lockstep alerts build
--config``), each a real process held to its memory limit (``process_bounds``); recursive aliases,
merge keys, deep nesting and keys that are not scalars in the loader itself."""
from __future__ import annotations

import re

import pytest

from lockstep.exporters.toolkit.configfile import (
    MAX_EXPANDED_NODES,
    PREVIEW_CHARS,
    ConfigError,
    Section,
    loads_yaml,
    preview,
)
from tests.helpers.process_bounds import Bounded, helm_memory_limit, smallest_helm_memory_limit

START_DEADLINE_S = 60.0   # for a command to start, read its config and exit: generous for a loaded machine


def laughs(levels: int, indent: str = "") -> str:
    """A YAML list whose item i is nine aliases of item i-1: item 8 stands for 9**9 strings."""
    items = [f"{indent}- &l0 [" + ", ".join(["lol"] * 9) + "]"]
    items += [f"{indent}- &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(items) + "\n"


BOMBS = {  # command, the file's name and text, the limit its process is held to, the key the error names
    "power-exporter": (["power-exporter", "--config"], "power.yaml",
                       "interval_s:\n" + laughs(9) + "targets:\n  - {name: a, kind: bmc, url: 'http://127.0.0.1:1'}\n",
                       lambda: helm_memory_limit("powerExporter"), "interval_s[5]"),
    "exporter": (["exporter", "--web.listen-address", "127.0.0.1:0", "--web.config.file"], "web.yml",
                 "basic_auth_users:\n  prom:\n" + laughs(9, "    "), lambda: helm_memory_limit("nodeAgent"),
                 "basic_auth_users.prom[5]"),
    "alerts build": (["alerts", "build", "--out", "{tmp}/out", "--config"], "alerts.yaml",
                     "thresholds:\n  pfc_paused_ratio:\n" + laughs(9, "    "), smallest_helm_memory_limit,
                     "thresholds.pfc_paused_ratio[5]"),
}


@pytest.mark.integration
@pytest.mark.parametrize("command", sorted(BOMBS))
def test_an_alias_bomb_in_a_typed_value_is_refused_at_start_naming_file_line_and_key(command, tmp_path):
    """Before: each command spent over 20 s and past 800 MB building the message "must be float, got
    list [[...]]" with the whole expansion in it. Now the loader refuses the expansion: exit code 2
    with FILE:LINE: key, within its memory limit."""
    args, name, text, limit, key = BOMBS[command]
    config = tmp_path / name
    config.write_text(text)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args] + [str(config)]
    proc = Bounded.lockstep(argv, limit(), tmp_path / "out.log")
    try:
        assert proc.exited(START_DEADLINE_S) == 2
    finally:
        proc.stop()
    error = proc.log().strip().splitlines()[-1]
    line = 1 + text.splitlines().index(next(s for s in text.splitlines() if "&l5" in s))
    assert re.search(rf"{re.escape(str(config))}:{line}: {re.escape(key)}: aliases expand this value to more than "
                     rf"{MAX_EXPANDED_NODES} YAML nodes", error), error
    assert len(proc.log()) < 1000


def test_a_bomb_under_the_bound_is_quoted_in_a_few_characters(tmp_path):
    """A smaller bomb (59,049 strings, within the loader's bound) in a typed value: the type error
    quotes the start of the value, however large its repr would be."""
    text = "interval_s:\n" + laughs(5)
    top = Section(loads_yaml(text, "c.yaml"), "c.yaml")
    with pytest.raises(ConfigError) as err:
        top.get("interval_s", float)
    message = str(err.value)
    assert message.startswith("c.yaml:1: interval_s: must be float, got list [['lol', 'lol'")
    assert message.endswith("...") and len(message) < 60 + PREVIEW_CHARS


@pytest.mark.parametrize("text, where, reason", [
    ("a: &a [1, *a]\n", "c.yaml:1: a[1]", "alias *a refers to a value that contains it"),
    ("a: &a {b: [*a]}\n", "c.yaml:1: a.b[0]", "alias *a refers to a value that contains it"),
    # merge keys multiply the same way as lists do
    ("d0: &d0 {k: 1}\n" + "".join(f"d{i}: &d{i} {{<<: [*d{i - 1}], l{i}: [" + ", ".join([f"*d{i - 1}"] * 9) + "]}\n"
                                  for i in range(1, 9)), "c.yaml:6: d5.l5", "aliases expand"),
    ("? [1, 2]\n: 3\n", "c.yaml:1", "a key must be a scalar, not a list"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "c.yaml", "nested too deeply"),
    # scalars Python cannot hold: PyYAML's ValueError named no line, and escaped `alerts build` as a traceback
    ("a: 1\nb: [2020-13-45]\n", "c.yaml:2", "invalid value: month must be in 1..12"),
    ("a: " + "9" * 5000 + "\n", "c.yaml:1", "invalid value: Exceeds the limit"),
    # a character YAML does not allow: a bare ReaderError before (found by the yaml fuzz target)
    ("a: 1\nb: x\x00y\n", "c.yaml:2", "invalid YAML: unacceptable character #x0000"),
])
def test_the_loader_refuses_what_cannot_be_a_config(text, where, reason):
    with pytest.raises(ConfigError) as err:
        loads_yaml(text, "c.yaml")
    assert str(err.value).startswith(where + ":") and reason in str(err.value), str(err.value)


def test_anchors_and_merge_keys_of_a_large_real_config_still_load():
    """A power exporter config of 5,000 targets sharing their credentials with ``<<: *bmc``: aliases
    expand it past MAX_EXPANDED_NODES, but by a small factor of what the file holds."""
    targets = "".join(f"  - {{<<: *bmc, name: n{i}, url: 'https://10.0.{i // 250}.{i % 250}', rack: r{i // 40}}}\n"
                      for i in range(5000))
    text = ("defaults: &bmc {kind: bmc, username_file: u, password_file: p, tls_verify: false, ca_file: null}\n"
            "targets:\n" + targets)
    data = loads_yaml(text, "power.yaml")
    assert len(data["targets"]) == 5000 and data["targets"][4999]["username_file"] == "u"


@pytest.mark.parametrize("value, expected", [
    ([1, "a"], "[1, 'a']"), ({"k": (1, None)}, "{'k': (1, None)}"), (3.5, "3.5"),
    ("x" * 100, "'" + "x" * (PREVIEW_CHARS - 1) + "..."),
])
def test_preview_is_repr_cut_short(value, expected):
    assert preview(value) == expected


def test_preview_of_a_recursive_or_huge_value_is_bounded():
    loop: list = []
    loop.append(loop)
    assert preview(loop) == "[" * PREVIEW_CHARS + "..."
    huge = [list(range(1000))] * 1000
    assert len(preview(huge)) == PREVIEW_CHARS + 3

