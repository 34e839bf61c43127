"""DCGM diagnostics: the JSON of ``dcgmi diag -r <level> -j``.

DCGM 4.x (NVIDIA's schema, testing/python3/dcgm_diag_schema.json): ``"DCGM Diagnostic" → test_categories[]
→ tests[] → results[]``, one result per entity (``entity_group`` GPU/CPU/..., ``entity_id``) with
``status`` Pass/Fail/Warn/Skip/Not Run and ``warnings[].warning``; the version under ``metadata``.
DCGM 3.x: ``"DCGM GPU Diagnostic"``, results per ``gpu_ids`` (a list like "0,1,2" or one id), statuses
upper-case, ``null`` entries between tests, the version beside the categories. dcgmi may print a line
before the document ("Successfully ran diagnostic for group."). A ``runtime_error`` means the diagnostic
could not run: no judgement, status ``error``.
"""
from __future__ import annotations

from lockstep.validation.lines import json_document, require_text
from lockstep.validation.model import Check, Parsed, ParseError

_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip", "not run": "skip"}


def _status(raw: object, where: str, source: str) -> str:
    status = _STATUS.get(str(raw).strip().lower())
    if status is None:
        raise ParseError(source, 1, f"{where}: unknown DCGM status {raw!r}")
    return status


def _message(result: dict) -> str:
    warnings = result.get("warnings") or []
    texts = [w.get("warning", "") if isinstance(w, dict) else str(w) for w in warnings]
    return "; ".join(t.strip() for t in texts if t and t.strip())


def _subjects(result: dict) -> list[str]:
    if "entity_group" in result:
        return [f"{str(result['entity_group']).lower()}{result['entity_id']}"]
    ids = result.get("gpu_ids")
    return [f"gpu{i.strip()}" for i in str(ids).split(",") if i.strip()] if ids is not None else [""]


def _checks(diag: dict, source: str) -> list[Check]:
    checks = []
    for category in diag.get("test_categories") or []:
        for test in category.get("tests") or []:
            if test is None:
                continue  # DCGM 3.x separates tests with nulls
            name = str(test.get("name", "")).strip()
            if not name or not isinstance(test.get("results"), list):
                raise ParseError(source, 1, f"test {name or '?'} without a name or results list")
            for result in test["results"]:
                status = _status(result.get("status"), f"test {name!r}", source)
                checks += [Check(name, status, subject, _message(result)) for subject in _subjects(result)]
    return checks


def parse_dcgm_diag(text: str, source: str = "<dcgmi diag -j output>") -> Parsed:
    """Each test's pass/warn/fail/skip per entity (``gpu3``), with DCGM's warning text as the message."""
    require_text(text, source)
    doc, _ = json_document(text, source, "`dcgmi diag -j`")
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(diag, dict):
        raise ParseError(source, 1, 'no "DCGM Diagnostic" object (not `dcgmi diag -j` output)')
    version = str((doc.get("metadata") or {}).get("version") or diag.get("version") or "")
    error = str(diag.get("runtime_error") or "")
    checks = _checks(diag, source)
    if not checks and not error:
        raise ParseError(source, 1, "the diagnostic reports no test results")
    driver = (doc.get("metadata") or {}).get("Driver Version Detected") or diag.get("Driver Version Detected")
    return Parsed("dcgm-diag", (), tuple(checks), (), "", version, {"driver_version": driver or ""}, error)
