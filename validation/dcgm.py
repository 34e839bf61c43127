"""DCGM diagnostics: the JSON of ``dcgmi diag -r <level> -j``.

DCGM 4.x (NVIDIA's schema, testing/python3/dcgm_diag_schema.json): ``"DCGM Diagnostic" → test_categories[]
→ tests[] → results[]``, one result per entity (``entity_group`` GPU/CPU/..., ``entity_id``) with
``status`` Pass/Fail/Warn/Skip/Not Run and ``warnings[].warning``; the version under ``metadata``.
DCGM 3.x: ``"DCGM GPU Diagnostic"``, results per ``gpu_ids`` (a list like "0,1,2" or one id), statuses
upper-case, ``null`` entries between tests, the version beside the categories. dcgmi may print a line
before the document ("Successfully ran diagnostic for group."). A ``runtime_error`` means the diagnostic
could not run: no judgement, status ``error``.

A result that names no entity DCGM could have meant (not an object, no ``entity_id``, an id that is not
a number, ``gpu_ids`` that are not numbers) loses only itself: it becomes a ``warn`` check of its test
with subject ``result<N>`` (its index in the test's results) saying why, so the run is not a clean pass
and ``--expect-gpus`` counts the GPU as untested; the other results are read as usual.
"""
from __future__ import annotations

import re

from lockstep.validation.lines import json_document, require_text
from lockstep.validation.model import Check, Parsed, ParseError

_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip", "not run": "skip"}
_GROUP = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")   # GPU, CPU, CPU_CORE, NvSwitch, GPU_I, ...
_ID = re.compile(r"\d{1,10}")


class _Unreadable(Exception):
    """A result that names no entity: lost alone, reported as a check."""


def _status(raw: object, where: str, source: str) -> str:
    status = _STATUS.get(str(raw).strip().lower())
    if status is None:
        raise ParseError(source, 1, f"{where}: unknown DCGM status {raw!r}")
    return status


def _message(result: dict) -> str:
    warnings = result.get("warnings") or []
    texts = [str(w.get("warning") or "") if isinstance(w, dict) else str(w)
             for w in (warnings if isinstance(warnings, list) else [warnings])]
    return "; ".join(t.strip() for t in texts if t.strip())


def _entity_id(raw: object) -> str:
    text = str(raw).strip() if isinstance(raw, (int, str)) and not isinstance(raw, bool) else ""
    if not _ID.fullmatch(text):
        raise _Unreadable(f"entity_id {str(raw)[:20]!r} is not an entity number" if raw is not None else "no entity_id")
    return str(int(text))


def _subjects(result: dict) -> list[str]:
    if "entity_group" in result:
        group = result["entity_group"]
        if not isinstance(group, str) or not _GROUP.fullmatch(group):
            raise _Unreadable(f"entity_group {str(group)[:20]!r} is not a DCGM entity group")
        return [f"{group.lower()}{_entity_id(result.get('entity_id'))}"]
    ids = result.get("gpu_ids")
    if ids is None:
        return [""]
    if not isinstance(ids, (int, str)) or isinstance(ids, bool):
        raise _Unreadable(f"gpu_ids {str(ids)[:20]!r} is not a list of GPU numbers")
    return [f"gpu{_entity_id(i)}" for i in str(ids).split(",") if i.strip()]


def _result_checks(name: str, index: int, result: object, source: str) -> list[Check]:
    try:
        if not isinstance(result, dict):
            raise _Unreadable("not an object")
        subjects = _subjects(result)
    except _Unreadable as exc:
        return [Check(name, "warn", f"result{index}", f"unreadable DCGM result, not judged: {exc}")]
    status = _status(result.get("status"), f"test {name!r}", source)
    return [Check(name, status, subject, _message(result)) for subject in subjects]


def _checks(diag: dict, source: str) -> list[Check]:
    checks = []
    categories = diag.get("test_categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, dict) for c in categories):
        raise ParseError(source, 1, "test_categories is not a list of objects")
    for category in categories:
        tests = category.get("tests") or []
        if not isinstance(tests, list) or not all(t is None or isinstance(t, dict) for t in tests):
            raise ParseError(source, 1, f"tests of category {str(category.get('category'))[:40]!r} is not a list of objects")
        for test in tests:
            if test is None:
                continue  # DCGM 3.x separates tests with nulls
            name = str(test.get("name", "")).strip()
            if not name or not isinstance(test.get("results"), list):
                raise ParseError(source, 1, f"test {name[:40] or '?'} without a name or results list")
            for index, result in enumerate(test["results"]):
                checks += _result_checks(name, index, result, source)
    return checks


def parse_dcgm_diag(text: str, source: str = "<dcgmi diag -j output>") -> Parsed:
    """Each test's pass/warn/fail/skip per entity (``gpu3``), with DCGM's warning text as the message."""
    require_text(text, source)
    doc, _ = json_document(text, source, "`dcgmi diag -j`")
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(diag, dict):
        raise ParseError(source, 1, 'no "DCGM Diagnostic" object (not `dcgmi diag -j` output)')
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = str(metadata.get("version") or diag.get("version") or "")
    error = str(diag.get("runtime_error") or "")
    checks = _checks(diag, source)
    if not checks and not error:
        raise ParseError(source, 1, "the diagnostic reports no test results")
    driver = metadata.get("Driver Version Detected") or diag.get("Driver Version Detected")
    return Parsed("dcgm-diag", (), tuple(checks), (), "", version, {"driver_version": driver or ""}, error)
