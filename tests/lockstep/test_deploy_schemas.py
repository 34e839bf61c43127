"""Every Kubernetes manifest lockstep ships, rendered from the chart (each values case) or plain under
deploy/kubernetes/, validated offline and strictly (an unknown field is an error): core objects against
the Kubernetes OpenAPI schemas of each supported version (kubernetes-validate), ServiceMonitor and
PrometheusRule against prometheus-operator's CRD schemas (tests/fixtures/prometheus-operator/)."""
from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.helpers.deploy_manifests import CASES, HELM_VALUES_FILES, K8S, named, objects, plain_manifest_files, yaml_docs
from tests.helpers.paths import REPO

# The three most recent minor versions kubernetes-validate ships schemas for (docs/deploy.md).
KUBERNETES_VERSIONS = ("1.35", "1.36", "1.37")
CRD_SCHEMAS = {("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.schema.yaml",
               ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.schema.yaml"}
NOT_VALIDATED = {("kustomize.config.k8s.io/v1beta1", "Kustomization")}   # read by kubectl, never applied


def every_manifest() -> dict[str, dict[str, Any]]:
    """Unique objects (identical ones from several renders once) → where they come from."""
    found: dict[str, tuple[str, dict]] = {}
    sources = [(f"chart[{case}]", objects(case)) for case in CASES]
    sources += [(str(p.relative_to(REPO)), yaml_docs(p)) for p in plain_manifest_files()]
    for where, objs in sources:
        for obj in objs:
            found.setdefault(json.dumps(obj, sort_keys=True), (where, obj))
    return {f"{where}: {o['kind']}/{o['metadata']['name']}": o for where, o in found.values()
            if (o["apiVersion"], o["kind"]) not in NOT_VALIDATED}


@pytest.fixture(scope="module", autouse=True)
def schemas_read_once():
    """kubernetes-validate re-reads a version's 1.8 MB definitions file on every call (80 % of the time
    here); its reader is a pure function of (file, version), so remember what it read."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes_validate.utils, "schema_contents", cache(kubernetes_validate.utils.schema_contents))
        yield


def test_versions_are_shipped_by_kubernetes_validate():
    shipped = {v.rsplit(".", 1)[0] for v in kubernetes_validate.utils.all_versions()}
    assert set(KUBERNETES_VERSIONS) <= shipped


def test_deploy_kubernetes_holds_only_manifests_and_helm_values():
    """A YAML file there is validated below, or is one of the named Helm values files (no apiVersion)."""
    for path in plain_manifest_files():
        assert all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in yaml_docs(path)), path
    for name in HELM_VALUES_FILES:
        assert not any("apiVersion" in d for d in yaml_docs(K8S / name)), name
    names = {str(p.relative_to(K8S)) for p in plain_manifest_files()}
    assert {"namespace.yaml", "kustomization.yaml", "generated/node-agent.yaml", "generated/dashboards.yaml"} <= names


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_objects_match_the_kubernetes_schemas(version):
    checked = 0
    for where, obj in every_manifest().items():
        if (obj["apiVersion"], obj["kind"]) in CRD_SCHEMAS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            pytest.fail(f"{where} (Kubernetes {version}): {getattr(exc, 'message', exc)}")
        checked += 1
    assert checked >= 12


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft4Validator:
    schema = yaml.safe_load((REPO / "tests/fixtures/prometheus-operator" / CRD_SCHEMAS[api_version, kind]).read_text())
    return jsonschema.Draft4Validator(strict(schema["schema"]))


def strict(schema: Any) -> Any:
    """additionalProperties: false where the CRD lists properties and allows no others, as the API
    server's strict field validation does."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def test_custom_resources_match_the_prometheus_operator_crds():
    checked = 0
    for where, obj in every_manifest().items():
        if (obj["apiVersion"], obj["kind"]) in CRD_SCHEMAS:
            errors = sorted(crd_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj), key=str)
            assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"
            checked += 1
    assert checked >= 4


def mutated(case: str, kind: str, name: str, change) -> dict:
    obj = copy.deepcopy(named(objects(case), kind, name))
    change(obj)
    return obj


def test_the_validators_refuse_what_a_cluster_refuses():
    """The checks above can fail: a misspelt field, a wrong type, a bad duration."""
    typo = mutated("default", "DaemonSet", "lockstep-node",
                   lambda o: o["spec"]["template"]["spec"].update(hostNetwrk=True))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES_VERSIONS[-1], strict=True)
    port = mutated("default", "Service", "lockstep-node", lambda o: o["spec"]["ports"][0].update(port="9840"))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(port, KUBERNETES_VERSIONS[0], strict=True)
    sm = mutated("default", "ServiceMonitor", "lockstep-node",
                 lambda o: o["spec"]["endpoints"][0].update(intervall="15s"))
    rule = mutated("default", "PrometheusRule", "lockstep", lambda o: o["spec"]["groups"][0].update(interval="15 s"))
    for obj in (sm, rule):
        assert list(crd_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj))

