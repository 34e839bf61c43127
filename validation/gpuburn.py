"""gpu-burn (wilicc/gpu-burn): the stdout of ``gpu_burn [-d] [-tc] SECONDS``.

It lists the GPUs ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)"), redraws a progress record every few
seconds with carriage returns ("100.0%  proc'd: 6783 (16942 Gflop/s) - ... errors: 0 - ... temps: 62 C
- ..."; a GPU whose worker died shows "(DIED!)"), and ends with "Tested 8 GPUs:" and one "GPU i: OK" or
"GPU i: FAULTY" line per GPU. Figures come from the last progress record; a run without the closing
summary is truncated.
"""
from __future__ import annotations

import re

from lockstep.validation.lines import Lines
from lockstep.validation.model import Check, Figure, Parsed, ParseError

_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)$")
_RECORD = re.compile(r"proc'd:(?P<procd>.*?)errors:(?P<errors>.*?)(?:temps:(?P<temps>.*))?$")
_GFLOPS = re.compile(r"\d+ \((\d+(?:\.\d+)?) Gflop/s\)")
_ERRORS = re.compile(r"(\d+)\s*(\((?:DIED|WARNING)!\))?")
_TESTED = re.compile(r"^Tested (\d+) GPUs:$")
_VERDICT = re.compile(r"^GPU (\d+): (OK|FAULTY)$")


def _record(text: str, number: int, source: str) -> tuple[list[float], list[tuple[int, bool]]]:
    m = _RECORD.search(text)
    if m is None:
        raise ParseError(source, number, f"malformed progress record: {text.strip()[:80]!r}")
    flops = [float(g) * 1e9 for g in _GFLOPS.findall(m["procd"])]   # Gflop/s
    errors = [(int(n), note == "(DIED!)") for n, note in _ERRORS.findall(m["errors"])]
    if len(flops) != len(errors):
        raise ParseError(source, number, "progress record lists Gflop/s and errors for different GPU counts")
    return flops, errors


def _scan(lines: Lines):
    gpus, last, verdicts, tested = {}, None, {}, None
    for number, line in lines:
        for part in line.split("\r"):
            part = part.strip()
            if (m := _GPU.match(part)):
                gpus[int(m[1])] = {"model": m[2], "uuid": m[3]}
            elif "proc'd:" in part:
                try:
                    last = (_record(part, number, lines.source), number)
                except ParseError as exc:
                    raise lines.fail(exc.line, exc.reason) from None
            elif (m := _TESTED.match(part)):
                tested = (int(m[1]), number)
            elif tested and (m := _VERDICT.match(part)):
                verdicts[int(m[1])] = m[2]
    return gpus, last, verdicts, tested


def parse_gpu_burn(text: str, source: str = "<gpu-burn output>") -> Parsed:
    """Gflop/s and errors per GPU (last progress record) and the OK/FAULTY verdict per GPU."""
    return parse_gpu_burn_lines(Lines.of_text(text, source))


def parse_gpu_burn_lines(lines: Lines) -> Parsed:
    """``parse_gpu_burn`` of an output read line by line (it redraws its progress record all run long)."""
    source = lines.source
    gpus, last, verdicts, tested = _scan(lines)
    end = lines.finish()
    if last is None:
        raise ParseError(source, end, "no gpu-burn progress record (not gpu-burn output?)")
    if tested is None or len(verdicts) != tested[0]:
        raise ParseError(source, end, "output ends before the 'Tested N GPUs' verdicts (truncated?)")
    (flops, errors), number = last
    if len(flops) != tested[0]:
        raise ParseError(source, number, f"last progress record covers {len(flops)} GPUs, {tested[0]} were tested")
    figures, checks = [], []
    for index, (rate, (count, died)) in enumerate(zip(flops, errors)):
        subject = f"gpu{index}"
        figures += [Figure("flop", "per_second", rate, subject), Figure("compute", "errors", float(count), subject)]
        faulty = verdicts.get(index) != "OK"
        message = "worker died" if died else f"{count} errors" if count else ""
        checks.append(Check("burn", "fail" if faulty else "pass", subject, message))
    return Parsed("gpu-burn", tuple(figures), tuple(checks), (), "", "", {"gpus": gpus})
