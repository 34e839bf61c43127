"""The power exporter's tests: its exposition read back by prometheus_client's own parser, and its
config file written from target entries."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.exposition import parse

__all__ = ["parse", "value", "write_config", "target"]


def value(values: dict, name: str, **labels) -> float:
    return values[(name, tuple(sorted(labels.items())))]


def write_config(tmp_path: Path, base: str, targets: list[str], timeout_s: float = 5.0, retries: int = 1) -> Path:
    path = tmp_path / "power.yaml"
    path.write_text(f"interval_s: 30\ntimeout_s: {timeout_s}\nretries: {retries}\ntargets:\n" + "".join(targets))
    return path


def target(name: str, kind: str, url: str, rack: str = "r1", extra: str = "") -> str:
    return f"  - name: {name}\n    kind: {kind}\n    url: {url}\n    rack: {rack}\n{extra}"
