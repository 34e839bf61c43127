"""How many GPUs a node should have, for ``lockstep_node_gpus_expected``: a number, or the node's
generic resources as Slurm knows them (``scontrol show node NAME -o``, read once at start)."""
from __future__ import annotations

import logging
import re
import subprocess

log = logging.getLogger("lockstep.gpu")
# One GRES entry of `scontrol show node -o`: gpu:8, gpu:h100:8, gpu:h100:8(S:0-1), gpu:a100:2(IDX:0-1).
_GPU_GRES = re.compile(r"^gpu(?::[^:(]+)?:(\d+)(?:\(.*\))?$")
SCONTROL_TIMEOUT_S = 10.0


def parse_slurm_gres(text: str) -> int | None:
    """The sum of the ``gpu`` entries of the ``Gres=`` field (None when the node has no GPU GRES)."""
    match = re.search(r"(?:^|\s)Gres=(\S+)", text)
    if match is None or match.group(1) in ("(null)", ""):
        return None
    counts = [int(m.group(1)) for entry in _split(match.group(1)) if (m := _GPU_GRES.match(entry))]
    return sum(counts) if counts else None


def _split(gres: str) -> list[str]:
    """Split on commas outside parentheses (``gpu:h100:8(S:0-1),nic:2``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(gres):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(gres[start:i])
            start = i + 1
    return parts + [gres[start:]]


def slurm_gpu_count(node: str, scontrol: str = "scontrol") -> int | None:
    """The node's GPU GRES from Slurm, or None (logged) when Slurm cannot say."""
    try:
        out = subprocess.run([scontrol, "show", "node", node, "-o"], capture_output=True, text=True,
                             timeout=SCONTROL_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("expected GPU count from Slurm unavailable (%s); lockstep_node_gpus_expected not reported", exc)
        return None
    count = parse_slurm_gres(out)
    if count is None:
        log.warning("Slurm lists no gpu GRES for node %s; lockstep_node_gpus_expected not reported", node)
    return count
