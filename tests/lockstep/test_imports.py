"""The import direction of docs/architecture.md, read from the source with ``ast``: every import
statement of the product's packages counts, at module level, inside a function or under
``TYPE_CHECKING`` (a lazy import is still a dependency), whichever branch it sits in.

The product is one import namespace, ``lockstep``; the repository's top-level folders are its
subpackages (``analytics/`` is ``lockstep.analytics``). Its layers, bottom to top: the catalog; the
toolkit every service shares; validation results; the node agent and the power exporter, the
simulator, alerts and dashboards; analytics (itself layered: the Prometheus client, the job frame,
the scorers, the service, evaluation and post-mortem, the monthly report); ``lockstep/`` (the command
and the local stack) on top, imported by nothing in the product but itself.
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.helpers.paths import REPO

# repository folder → the package the wheel installs it as
FOLDERS = {"lockstep": "lockstep", **{f: f"lockstep.{f}" for f in
                                      ("exporters", "analytics", "alerts", "dashboards", "simulator", "validation")}}
CATALOG = "lockstep.exporters.catalog"
TOOLKIT = ("lockstep.exporters.toolkit", "lockstep.exporters.third_party")
A = "lockstep.analytics"
# The layers, most specific prefix first: a module belongs to the first whose prefix it has.
LAYERS = {
    "catalog": (CATALOG,),
    "toolkit": TOOLKIT,
    "prom": (f"{A}.prom",),
    "frame": (f"{A}.frame",),
    "scoring": (f"{A}.scoring",),
    "service": (f"{A}.service",),
    "evaluation": (f"{A}.evaluation",),
    "report": (f"{A}.report",),
    "hang": (f"{A}.hang",),
    "analytics": (A,),
    "validation": ("lockstep.validation",),
    "exporters": ("lockstep.exporters",),
    "simulator": ("lockstep.simulator",),
    "alerts": ("lockstep.alerts",),
    "dashboards": ("lockstep.dashboards",),
    "lockstep": ("lockstep",),
}
# What each layer may import besides itself: layers, or modules (a module and those below it).
STORE = ("lockstep.validation.store", "lockstep.validation.result", "lockstep.validation.model")
ALLOWED = {
    "catalog": set(),
    "toolkit": {"catalog"},
    # validation results: the parsers, the store and `lockstep validate`
    "validation": {"catalog", "toolkit"},
    # the node agent's validation collector reads the results store (its format and its node names)
    "exporters": {"catalog", "toolkit", *STORE},
    # the simulator stores validation results as `lockstep validate` does: through its store
    "simulator": {"catalog", "toolkit", *STORE},
    "alerts": {"catalog", "toolkit"},
    # a panel shows the very series an alert fires on: the recording rules, by their recorded names
    "dashboards": {"catalog", "toolkit", "lockstep.alerts.recording", "lockstep.alerts.settings",
                   "lockstep.alerts.model"},
    "prom": {"catalog", "toolkit"},
    # the frame places decoded answers on a query's grid; it never calls Prometheus
    "frame": {"catalog", "toolkit", f"{A}.prom.grid", f"{A}.prom.decode", f"{A}.prom.promql", f"{A}.prom.errors"},
    # the scorers read the features and nothing else of analytics: no service, no Prometheus client
    "scoring": {"catalog", "toolkit", f"{A}.frame.features"},
    "service": {"catalog", "toolkit", "prom", "frame", "scoring"},
    # the evaluation harness runs the simulator in process and grades the scores against its truth
    "evaluation": {"catalog", "toolkit", "prom", "frame", "scoring", "service", "simulator"},
    "report": {"catalog", "toolkit", "prom"},
    # Flight Recorder dumps read from files: nothing of Prometheus or the scorers
    "hang": {"catalog", "toolkit"},
    "analytics": {"catalog", "toolkit", "prom", "frame", "scoring", "service", "evaluation", "report", "hang"},
    "lockstep": set(LAYERS),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    parts = (FOLDERS[parts[0]].split(".") + list(parts[1:]))
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for folder in FOLDERS for path in sorted((REPO / folder).rglob("*.py"))}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer(module: str) -> str:
    return next(name for name, prefixes in LAYERS.items() if any(_under(module, p) for p in prefixes))


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".")
    is_package = modules()[module].name == "__init__.py"
    base = package[:len(package) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def imported(module: str) -> frozenset[str]:
    """The project modules ``module`` imports: ``from a import b`` names ``a.b`` where that is a module."""
    found = set()
    for node in ast.walk(ast.parse(modules()[module].read_text(), str(modules()[module]))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base for a in node.names)
    return frozenset(name for name in found if _under(name, "lockstep"))


def allowed(of_layer: str, target: str) -> bool:
    return layer(target) in (of_layer, *ALLOWED[of_layer]) or any(_under(target, a) for a in ALLOWED[of_layer])


def violations(*of_layers: str) -> list[str]:
    return sorted(f"{module} imports {target}" for module in modules() if layer(module) in of_layers
                  for target in imported(module) if not allowed(layer(module), target))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), or a node importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _module_graph() -> dict[str, set[str]]:
    # a package's __init__ is what ``import a.b`` runs first: an edge to it is not a cycle of its own
    return {m: {t for t in imported(m) if t in modules() and t != m and modules()[t].name != "__init__.py"}
            for m in modules()}


def test_the_walk_sees_module_level_lazy_and_relative_imports():
    """The rules below can fail: the walk finds imports known to be there, however they are written."""
    assert "lockstep.simulator.truth" in imported(f"{A}.evaluation.evaluate")
    assert "lockstep.exporters.toolkit.logs" in imported("lockstep.alerts.quarantine_cli")      # inside a function
    assert CATALOG in imported("lockstep.alerts.model")              # ``from lockstep.exporters import catalog``
    assert "lockstep.simulator.state" in imported("lockstep.simulator.signals")   # under TYPE_CHECKING
    assert layer(f"{CATALOG}.fabric") == "catalog" and layer("lockstep.exporters.toolkit.web") == "toolkit"
    assert layer(f"{A}.scoring.stall") == "scoring" and layer(f"{A}.cli") == "analytics"
    assert not allowed("dashboards", "lockstep.alerts.rules") and not allowed("alerts", "lockstep.dashboards.queries")
    assert not allowed("simulator", "lockstep.exporters.fabric.topology")
    assert allowed("simulator", f"{CATALOG}.gpu")
    assert not allowed("scoring", f"{A}.prom.api") and not allowed("scoring", f"{A}.service.state")


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules():
    assert cycles(_module_graph()) == []


def test_no_import_circle_between_layers():
    graph: dict[str, set[str]] = {}
    for module in modules():
        graph.setdefault(layer(module), set()).update(layer(t) for t in imported(module) if t in modules())
    for name in graph:
        graph[name].discard(name)
    assert cycles(graph) == []


def test_the_catalog_imports_nothing_of_the_project_but_itself():
    assert violations("catalog") == []


def test_the_toolkit_imports_only_the_catalog():
    assert violations("toolkit") == []


def test_the_exporters_never_import_the_services_the_simulator_or_the_command():
    assert violations("exporters") == []


def test_the_simulator_imports_only_the_catalog_the_toolkit_and_the_validation_store():
    assert violations("simulator") == []


def test_alerts_and_dashboards_import_the_catalog_the_toolkit_and_dashboards_the_recording_rules():
    assert violations("alerts", "dashboards") == []


def test_the_scorers_import_neither_the_service_nor_the_prometheus_client():
    assert violations("scoring") == []
    assert violations("frame") == []


def test_analytics_layers_import_only_those_below_them():
    assert violations("prom", "service", "evaluation", "report", "hang", "analytics") == []


def test_validation_imports_only_the_catalog_and_the_toolkit():
    assert violations("validation") == []
    assert "lockstep.validation.store" in imported("lockstep.exporters.collectors.validation")


def test_nothing_in_the_product_imports_lockstep_but_lockstep():
    assert sorted(f"{m} imports {t}" for m in modules() if layer(m) != "lockstep"
                  for t in imported(m) if layer(t) == "lockstep") == []
