"""``lockstep alerts build``: write the rule file and alertmanager.yml for one config."""
from __future__ import annotations

from pathlib import Path

from lockstep.alerts import alertmanager, rules
from lockstep.alerts.config import AlertsConfig

RULES_FILE = "lockstep-rules.yml"
ALERTMANAGER_FILE = "alertmanager.yml"


def outputs(config: AlertsConfig) -> dict[str, str]:
    """File name → content; the same mapping the committed deploy/prometheus/ is checked against."""
    return {RULES_FILE: rules.render(config), ALERTMANAGER_FILE: alertmanager.render(config)}


def write(config: AlertsConfig, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in outputs(config).items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
