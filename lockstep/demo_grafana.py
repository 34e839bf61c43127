"""Dashboards for the demo: start ``grafana-server`` with deploy/grafana's provisioning when it is
installed, otherwise say how to run the compose file that does the same."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from lockstep.demo_config import GRAFANA_DIR
from lockstep.stack import Service, Stack, start_process

HOMEPATHS = ("/usr/share/grafana", "/opt/grafana")


def provisioning(workdir: Path, prometheus_url: str) -> Path:
    """deploy/grafana's dashboard provider (pointed at the repo's dashboards) and a datasource for
    the demo Prometheus."""
    prov = workdir / "grafana" / "provisioning"
    (prov / "datasources").mkdir(parents=True, exist_ok=True)
    (prov / "dashboards").mkdir(parents=True, exist_ok=True)
    source = yaml.safe_load((GRAFANA_DIR / "provisioning" / "datasources" / "lockstep.yaml").read_text())
    source["datasources"][0]["url"] = prometheus_url
    (prov / "datasources" / "lockstep.yaml").write_text(yaml.safe_dump(source, sort_keys=False))
    provider = yaml.safe_load((GRAFANA_DIR / "provisioning" / "dashboards" / "lockstep.yaml").read_text())
    provider["providers"][0]["options"]["path"] = str(GRAFANA_DIR / "dashboards")
    (prov / "dashboards" / "lockstep.yaml").write_text(yaml.safe_dump(provider, sort_keys=False))
    return prov


def start_grafana(workdir: Path, prometheus_url: str, port: int, stack: Stack) -> Service | None:
    """None when grafana-server is not installed."""
    binary = shutil.which("grafana-server") or shutil.which("grafana")
    home = next((h for h in HOMEPATHS if Path(h, "conf", "defaults.ini").exists()), None)
    if binary is None or home is None or not GRAFANA_DIR.exists():
        return None
    data = workdir / "grafana"
    argv = [binary, *(["server"] if binary.endswith("/grafana") else []), f"--homepath={home}",
            f"cfg:paths.provisioning={provisioning(workdir, prometheus_url)}", f"cfg:paths.data={data / 'data'}",
            f"cfg:paths.logs={data / 'logs'}", "cfg:server.http_addr=127.0.0.1", f"cfg:server.http_port={port}",
            "cfg:auth.anonymous.enabled=true", "cfg:auth.anonymous.org_role=Viewer", "cfg:analytics.reporting_enabled=false"]
    return stack.add(start_process("grafana", argv, data, f"http://127.0.0.1:{port}", ready_path="/api/health",
                                   timeout=90))


def compose_hint(prometheus_port: int) -> str:
    hint = ("grafana-server is not installed. To see the dashboards, run Grafana in Docker with the same\n"
            "  provisioning (from the repository root):\n"
            "    docker compose -f deploy/compose/grafana-demo.yml up\n"
            "  then open http://127.0.0.1:3000 (folder \"lockstep\").")
    if prometheus_port != 9090:
        hint += (f"\n  The demo's Prometheus is on port {prometheus_port}: change the url in "
                 "deploy/compose/grafana-demo-datasource.yaml to match.")
    return hint
