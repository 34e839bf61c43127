"""Alert and recording rules: real promtool checks and unit tests, the contract, the catalog, runbooks,
the committed deploy/prometheus/ output and the config file's errors."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lockstep import cli
from lockstep.alerts import build, config, rules
from lockstep.exporters.catalog import CATALOG
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.stack import require_binary
from tests.helpers.alerting import ALERTS
from tests.helpers.paths import REPO

UNIT_TESTS = sorted(ALERTS.glob("*_test.yml"))
PROMTOOL_CONFIG = ALERTS / "promtool-config.yaml"
# docs/architecture.md "Alert names": the contract, with the severity each one must carry.
CONTRACT = {
    "PFCPauseStorm": "page", "InfiniBandLinkDown": "page", "InfiniBandLinkFlapping": "ticket",
    "InfiniBandSymbolErrors": "ticket", "InfiniBandLinkDegraded": "ticket", "GPUXidCritical": "page",
    "GPUUncorrectableECC": "ticket", "GPURowRemapFailure": "ticket", "GPUThermalThrottling": "ticket",
    "GPUFellOffBus": "page", "TrainingJobStalled": "page", "TrainingJobStraggler": "ticket",
    "TrainingJobHung": "page", "CheckpointStallExcessive": "ticket", "RackPowerNearBudget": "page",
    "CoolantTemperatureHigh": "ticket", "ExporterCollectorFailing": "ticket", "ExporterDown": "ticket",
    "GPUMissing": "page",
    # Added with the XID catalog and the per-GPU verdict (extending the contract).
    "GPUXidWarning": "ticket", "GPURowRemapPending": "ticket",
    "ValidationFailed": "page", "ValidationRegression": "ticket",
    "TrainingJobMemberLost": "page",
    # Added with causes on findings: a straggler its own hardware explains (a quarantine candidate).
    "GPUHardwareStraggler": "ticket",
    # Added with hang localisation: a page for a job of rank_hung_page_gpus GPUs or more, else a ticket.
    "TrainingJobRankHung": "page|ticket",
    # Added with the fabric exporter's link-health verdicts.
    "LinkFailed": "page", "LinkDegraded": "ticket",
    # Added with the node-side storage collectors.
    "NVMeWearing": "ticket",
    # Added with rail imbalance from the hosts' per-rail bytes.
    "FabricRailImbalance": "ticket",
    # Added with peer-relative GPU health (the analytics service's fleet pass).
    "GPUSlowerThanPeers": "ticket",
    # Added with storage systems and checkpoints as facts.
    "StorageLatencyHigh": "ticket", "CheckpointSlow": "ticket",
    # Added with Spectrum Scale waiters (mmdiag --waiters).
    "GPFSClientStalled": "ticket",
}


def _promtool(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([require_binary("promtool"), *map(str, args)], cwd=cwd, capture_output=True, text=True)


def _unit_test_dir(tmp_path: Path, cfg: config.AlertsConfig) -> Path:
    (tmp_path / build.RULES_FILE).write_text(rules.render(cfg))
    for test in UNIT_TESTS:
        shutil.copy(test, tmp_path)
    return tmp_path


@pytest.mark.integration
def test_generated_rules_pass_promtool_check(tmp_path: Path) -> None:
    build.write(config.load(None), tmp_path)
    result = _promtool("check", "rules", build.RULES_FILE, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.integration
def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    workdir = _unit_test_dir(tmp_path, config.load(PROMTOOL_CONFIG))
    result = _promtool("test", "rules", *(t.name for t in UNIT_TESTS), cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
def test_unit_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """The same tests against rules whose PFC threshold is above the storm's 50 % must fail."""
    override = tmp_path / "override.yaml"
    override.write_text("runbook_base_url: https://runbooks.test\nthresholds: {pfc_paused_ratio: 0.6}\n")
    (tmp_path / "run").mkdir()
    workdir = _unit_test_dir(tmp_path / "run", config.load(override))
    result = _promtool("test", "rules", "fabric_test.yml", cwd=workdir)
    assert result.returncode != 0
    assert "alertname: PFCPauseStorm" in result.stdout + result.stderr


def _unit_test_cases() -> dict[str, set[str]]:
    """alertname → {"firing", "not firing"} over every promtool test file."""
    cases: dict[str, set[str]] = {}
    for path in UNIT_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                kind = "firing" if case.get("exp_alerts") else "not firing"
                cases.setdefault(case["alertname"], set()).add(kind)
    return cases


def test_every_contract_alert_has_firing_and_not_firing_unit_tests() -> None:
    cases = _unit_test_cases()
    for name in CONTRACT:
        assert cases.get(name) == {"firing", "not firing"}, f"{name}: promtool cases {cases.get(name)}"


def test_alerts_are_the_contract_with_its_severities() -> None:
    generated = yaml.safe_load(rules.render(config.load(None)))
    alerts = [r for g in generated["groups"] for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == set(CONTRACT)
    for alert in alerts:
        assert alert["labels"]["severity"] in CONTRACT[alert["alert"]].split("|"), alert["alert"]
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}


def test_every_metric_a_rule_names_is_in_the_catalog_and_every_recorded_name_is_recorded() -> None:
    generated = yaml.safe_load(rules.render(config.load(None)))
    all_rules = [r for g in generated["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in all_rules if "record" in r}
    for rule in all_rules:
        names = set(re.findall(r"(?<![\w:])(lockstep_[a-z0-9_]+)", rule["expr"]))
        assert names <= set(CATALOG), f"{rule.get('alert') or rule['record']}: {names - set(CATALOG)}"
        used = set(re.findall(r"(?<![\w:])(lockstep:[a-z0-9_:]+)", rule["expr"]))
        assert used <= recorded, f"{rule.get('alert') or rule['record']} uses unrecorded {used - recorded}"


def test_every_alert_has_a_runbook_with_what_to_check_and_do() -> None:
    generated = yaml.safe_load(rules.render(config.load(None)))
    for rule in (r for g in generated["groups"] for r in g["rules"] if "alert" in r):
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"].endswith(f"/docs/runbooks/{name}.md")
        text = (REPO / "docs" / "runbooks" / f"{name}.md").read_text()
        assert text.startswith(f"# {name}\n")
        assert f"**Severity:** {rule['labels']['severity']}." in text, name
        assert "## Check" in text and "## Act" in text, name


def test_committed_deploy_output_equals_fresh_generation() -> None:
    deploy = REPO / "deploy" / "prometheus"
    fresh = build.outputs(config.load(deploy / "alerts.yaml"))
    for name, text in fresh.items():
        assert (deploy / name).read_text() == text, (
            f"deploy/prometheus/{name} is stale: run lockstep alerts build --config deploy/prometheus/alerts.yaml "
            "--out deploy/prometheus")


def test_config_overrides_reach_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "alerts.yaml"
    path.write_text("selectors: {node: 'job=\"gpu-nodes\"'}\nthresholds: {rack_power_budget_ratio: 0.95}\n"
                    "for: {PFCPauseStorm: 10s, TrainingJobStalled: 20m}\n")
    text = rules.render(config.load(path))
    assert 'lockstep_gpu_job_info{job="gpu-nodes"}' in text and 'job="lockstep-node"' not in text
    assert "lockstep:rack_power_budget:ratio > 0.95" in text
    alerts = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r]
    assert {r["for"] for r in alerts if r["alert"] == "PFCPauseStorm"} == {"10s"}
    [stalled] = [r for r in alerts if r["alert"] == "TrainingJobStalled"]
    assert stalled["for"] == "20m" and "no progress for 20m;" in stalled["annotations"]["description"]


@pytest.mark.parametrize("body, where", [
    ("thresholds:\n  pfc_paused_ratoi: 0.3\n", ":2: thresholds.pfc_paused_ratoi: unknown key"),
    ("thresholds:\n  pfc_paused_ratio: high\n", ":2: thresholds.pfc_paused_ratio: must be float"),
    ("for:\n  PFCPauseStorm: 1 minute\n", ":2: for.PFCPauseStorm: must be a Prometheus duration"),
    ("for:\n  PfcPauseStorm: 1m\n", ":2: for.PfcPauseStorm: unknown alert"),
    ("selectors: {node: 1}\n", ":1: selectors.node: must be str"),
    ("thresholds:\n  x: 1\n  rack_power_budget_ratio: 90\n", ":3: thresholds.rack_power_budget_ratio: must be a fraction"),
    ("validation_floors:\n  - {match: 'kind=\"nccl\"', min: fast}\n", ":2: validation_floors[0].min: must be a number"),
    ("validation_floors:\n  - {match: 'kind=\"nccl\"', min: -1}\n", ":2: validation_floors[0].min: must be > 0"),
    ("validation_floors:\n  - {min: 4.5e10}\n", ":2: validation_floors[0].match: required key"),
])
def test_config_errors_name_file_line_and_key(tmp_path: Path, body: str, where: str) -> None:
    path = tmp_path / "alerts.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        config.load(path)
    assert str(err.value).startswith(str(path) + where), str(err.value)


def test_cli_build_writes_both_files_and_rejects_a_bad_config(tmp_path: Path, capsys) -> None:
    assert cli.main(["alerts", "build", "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["alertmanager.yml", "lockstep-rules.yml"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("thresholds: [1]\n")
    assert cli.main(["alerts", "build", "--config", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert f"{bad}:1: thresholds: must be dict" in capsys.readouterr().err


def _assert_promtool_passes(tmp_path: Path, name: str, case: str) -> None:
    """``case``: the input series and alert tests of one promtool unit test run every minute."""
    workdir = _unit_test_dir(tmp_path, config.load(PROMTOOL_CONFIG))
    (workdir / name).write_text("rule_files: [lockstep-rules.yml]\nevaluation_interval: 1m\n"
                                "tests:\n  - interval: 1m\n" + case)
    result = _promtool("test", "rules", name, cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr


XID_FIRST_EVENT = """\
    input_series:
      # The agent's XidWatcher creates a (gpu, xid) series only on its first event, already at 1:
      # no 0 sample precedes it, so increase() alone sees nothing.
      - series: 'lockstep_gpu_xid_errors_total{job="lockstep-node",instance="node01:9840",node="node01",gpu="3",xid="79",severity="critical",category="hardware",action="reboot_node"}'
        values: '_x7 1x32'
      # an XID counted long before (the series is 12m old at the check) must not page again
      - series: 'lockstep_gpu_xid_errors_total{job="lockstep-node",instance="node01:9840",node="node01",gpu="4",xid="79",severity="critical",category="hardware",action="reboot_node"}'
        values: '1x40'
    alert_rule_test:
      - eval_time: 12m
        alertname: GPUXidCritical
        exp_alerts:
          - exp_labels: {severity: page, job: lockstep-node, instance: "node01:9840", node: node01, gpu: "3", xid: "79", category: hardware, action: reboot_node}
            exp_annotations:
              summary: Critical XID 79 on GPU 3 on node01
              description: "GPU 3 on node01 reported XID 79 (hardware) 1 times in 10m. NVIDIA's recovery action: reboot_node; the GPU must take no new work until it is done."
              runbook_url: https://runbooks.test/GPUXidCritical.md
      - eval_time: 30m
        alertname: GPUXidCritical
        exp_alerts: []
"""  # noqa: E501 (promtool's test YAML: series selectors and alert texts are compared as written)


@pytest.mark.integration
def test_first_xid_of_a_gpu_pages_although_its_series_starts_at_one(tmp_path: Path) -> None:
    _assert_promtool_passes(tmp_path, "xid_first_test.yml", XID_FIRST_EVENT)


NODE_TARGETS_GONE = """\
    input_series:
      # Service discovery lost every node agent at 5m (DaemonSet deleted, selector typo): `up` is not 0,
      # it is gone, and every hardware alert goes silent with it.
      - series: 'up{job="lockstep-node",instance="node01:9840",node="node01"}'
        values: '1x4'
      - series: 'up{job="lockstep-power",instance="power:9841"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 4m
        alertname: ExporterDown
        exp_alerts: []
      - eval_time: 20m
        alertname: ExporterDown
        exp_alerts:
          - exp_labels: {severity: ticket, signal: targets_gone, job: lockstep-node}
            exp_annotations:
              summary: no lockstep-node target is scraped
              description: "Prometheus has no target left for job=\\"lockstep-node\\": service discovery lost every node agent, so every GPU and fabric alert is blind."
              runbook_url: https://runbooks.test/ExporterDown.md
"""  # noqa: E501 (promtool's test YAML: series selectors and alert texts are compared as written)


@pytest.mark.integration
def test_exporter_down_fires_when_every_node_agent_target_disappears(tmp_path: Path) -> None:
    _assert_promtool_passes(tmp_path, "targets_gone_test.yml", NODE_TARGETS_GONE)
