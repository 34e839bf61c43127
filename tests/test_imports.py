"""The import direction of docs/architecture.md, read from the source with ``ast``: every import
statement of the product's packages counts, at module level or inside a function (a lazy import is
still a dependency), whichever branch it sits in.

The catalog is at the bottom; the shared plumbing in ``exporters`` sits on it; the node agent, the
simulator, alerts, dashboards and analytics on those; ``lockstep/`` (the command and the local stack)
on top, imported by nothing in the product but itself.
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("exporters", "analytics", "alerts", "dashboards", "simulator", "validation", "lockstep")
CATALOG = "exporters.catalog"
# The small toolkit every lockstep service shares (docs/architecture.md, "Packages"): YAML config files
# with located errors, listen addresses, logging, the web config file and HTTP serving, the exposition
# encoder and its samples, the one /metrics response, --help formatting, the version, and third_party:
# the kubelet's PodResources wire format (its upstream proto and the code generated from it; the node agent
# reads it, the simulator serves it). Everything else in exporters/ is the node agent or the power exporter,
# which no other package may reach into.
PLUMBING = ("exporters.configfile", "exporters.listen", "exporters.logs", "exporters.webconfig", "exporters.web",
            "exporters.exposition", "exporters.sample", "exporters.httpmetrics", "exporters.helpformat",
            "exporters.basicauth", "exporters.jsonload", "exporters.timeparse",
            "exporters.version", "exporters.third_party",
            "exporters.conntimeouts", "exporters.looperrors", "exporters.openfiles")
# What each layer may import besides itself: layers, or modules (a module and those below it).
ALLOWED = {
    CATALOG: set(),
    "plumbing": {CATALOG},
    # validation results: the parsers, the store and `lockstep validate`, on the catalog and the plumbing
    "validation": {CATALOG, "plumbing"},
    # the node agent's validation collector reads the results store (its format and its node names)
    "exporters": {CATALOG, "plumbing", "validation.store", "validation.result", "validation.model"},
    # the simulator stores validation results as `lockstep validate` does: through its store
    "simulator": {CATALOG, "plumbing", "validation.store", "validation.result", "validation.model"},
    "alerts": {CATALOG, "plumbing"},
    # a panel shows the very series an alert fires on: the recording rules, by their recorded names
    "dashboards": {CATALOG, "plumbing", "alerts.recording"},
    "analytics": {CATALOG, "plumbing", "simulator"},  # the evaluation harness scores simulated scenarios
    "lockstep": {CATALOG, "plumbing", "exporters", "simulator", "alerts", "dashboards", "analytics", "validation"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))}


def layer(module: str) -> str:
    if module == CATALOG or module.startswith(CATALOG + "."):
        return CATALOG
    if any(module == p or module.startswith(p + ".") for p in PLUMBING):
        return "plumbing"
    return module.split(".")[0]


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".")
    is_package = modules()[module].name == "__init__.py"
    base = package[:len(package) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imported(module: str) -> set[str]:
    """The project modules ``module`` imports: ``from a import b`` names ``a.b`` where that is a module."""
    found = set()
    for node in ast.walk(ast.parse(modules()[module].read_text(), str(modules()[module]))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base for a in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def allowed(of_layer: str, target: str) -> bool:
    return layer(target) in (of_layer, *ALLOWED[of_layer]) or \
        any(target == a or target.startswith(a + ".") for a in ALLOWED[of_layer])


def violations(of_layer: str) -> list[str]:
    return sorted(f"{module} imports {target}" for module in modules() if layer(module) == of_layer
                  for target in imported(module) if not allowed(of_layer, target))


def test_the_walk_sees_module_level_lazy_and_relative_imports():
    """The rules below can fail: the walk finds imports known to be there, however they are written."""
    assert "simulator.truth" in imported("analytics.evaluate")
    assert "exporters.logs" in imported("alerts.quarantine_cli")      # inside a function
    assert "exporters.catalog" in imported("alerts.model")              # ``from exporters import catalog``
    assert layer("exporters.catalog.fabric") == CATALOG and layer("exporters.web") == "plumbing"
    assert not allowed("dashboards", "alerts.rules") and not allowed("alerts", "dashboards.queries")
    assert not allowed("simulator", "exporters.fabric.topology") and allowed("simulator", "exporters.catalog.gpu")


def test_the_catalog_imports_nothing_of_the_project_but_itself():
    assert violations(CATALOG) == []


def test_the_shared_plumbing_imports_only_the_catalog():
    assert violations("plumbing") == []


def test_the_exporters_never_import_the_services_the_simulator_or_the_command():
    assert violations("exporters") == []


def test_the_simulator_imports_only_the_catalog_the_plumbing_and_the_validation_store():
    assert violations("simulator") == []


def test_alerts_and_dashboards_import_the_catalog_the_plumbing_and_dashboards_the_recording_rules():
    assert violations("alerts") + violations("dashboards") == []


def test_analytics_imports_no_alerts_dashboards_node_agent_or_command():
    assert violations("analytics") == []


def test_validation_imports_only_the_catalog_and_the_plumbing():
    assert violations("validation") == []
    assert "validation.store" in imported("exporters.collectors.validation")


def test_nothing_in_the_product_imports_lockstep_but_lockstep():
    assert sorted(f"{m} imports {t}" for m in modules() if layer(m) != "lockstep"
                  for t in imported(m) if layer(t) == "lockstep") == []
