"""The Kubernetes manifests lockstep ships, for tests/lockstep/test_deploy_*.py: the Helm chart rendered by
Helm's own engine (helm-python-sdk) for its default values and each values file under
deploy/helm/lockstep/ci/, and the plain manifests under deploy/kubernetes/."""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from lockstep import deploy_gen

CHART = deploy_gen.CHART
K8S = deploy_gen.KUSTOMIZE
# Helm values in deploy/kubernetes, not manifests (checked: no apiVersion/kind in them)
HELM_VALUES_FILES = ("chart-values.yaml", "scale-out/kube-prometheus-stack-values.yaml")
# values case -> values file: the chart's defaults, each CI values file, and the values
# deploy/kubernetes/generated/ is rendered with
CASES: dict[str, Path | None] = {"default": None, **{
    p.name.removesuffix("-values.yaml"): p for p in sorted((CHART / "ci").glob("*-values.yaml"))},
    "kustomize": deploy_gen.CHART_VALUES}


def values(case: str) -> dict[str, Any]:
    path = CASES[case]
    return yaml.safe_load(path.read_text()) if path else {}


@cache
def rendered(case: str) -> dict[str, str]:
    return deploy_gen.render_chart(values(case))


@cache
def objects(case: str) -> list[dict[str, Any]]:
    """The render's objects (shared between tests: never modify them)."""
    return deploy_gen.manifests(rendered(case))


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    return found


def yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def plain_manifest_files() -> list[Path]:
    """Every YAML file under deploy/kubernetes/ except the Helm values files."""
    return [p for p in sorted(K8S.rglob("*.y*ml"))
            if p.suffix in (".yaml", ".yml") and str(p.relative_to(K8S)) not in HELM_VALUES_FILES]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec(workload)["containers"]
    return only
