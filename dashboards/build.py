"""All lockstep dashboards, rendered to deterministic JSON files (one per dashboard)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lockstep.dashboards import fabric, job, node, overview, power, storage, validation
from lockstep.dashboards.config import DEFAULT, Config
from lockstep.dashboards.grafana import render, to_text

MODULES = (overview, job, node, fabric, storage, power, validation)


def build_all(cfg: Config = DEFAULT) -> dict[str, dict[str, Any]]:
    """``{"lockstep-overview.json": dashboard_json, ...}`` in a fixed order."""
    return {f"{cfg.uid(m.NAME)}.json": render(m.build(cfg)) for m in MODULES}


def write_all(out: Path, cfg: Config = DEFAULT) -> list[Path]:
    """Write every dashboard into ``out`` (created if missing); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, data in build_all(cfg).items():
        path = out / filename
        path.write_text(to_text(data))
        written.append(path)
    return written
