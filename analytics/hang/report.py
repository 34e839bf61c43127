"""What ``lockstep analytics hang`` prints: the JSON document (``--json``, shape in docs/hang.md, held
stable: fields are added, never renamed) and the text an on-call engineer reads, which says what was
found, where (rank, node, GPU) and what to look at next.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

from lockstep.analytics.hang.dump import DirRead
from lockstep.analytics.hang.match import (
    COLLECTIVE,
    MISMATCH,
    MISSING,
    NO_DUMP,
    STALLED,
    Analysis,
    Finding,
    RankState,
    Waiting,
)
from lockstep.analytics.hang.placement import Place

SCHEMA = 1
RANK_LINES = 12           # text: lines of per-rank states shown per finding before "... and N more"
MORE_FINDINGS = 5         # text: findings shown after the first


def document(analysis: Analysis, read: DirRead, directory: str, places: Mapping[int, Place]) -> dict[str, Any]:
    """The ``--json`` document."""
    def place(rank: int) -> dict[str, Any]:
        p = places.get(rank)
        return {"rank": rank, "node": p.node if p else None, "gpu": p.gpu if p else None}

    formats: dict[str, int] = defaultdict(int)
    for d in read.dumps.values():
        formats[d.fmt] += 1
    return {
        "schema": SCHEMA,
        "verdict": "hang" if analysis.hang else "no_hang",
        "summary": summary(analysis, places),
        "dumps": {"directory": directory, "ranks": list(analysis.dumps), "formats": dict(sorted(formats.items())),
                  "versions": list(analysis.versions),
                  "unreadable": [{"file": u.file, "rank": u.rank, "reason": u.reason} for u in read.unreadable],
                  "ignored": list(read.ignored)},
        "world": list(analysis.world),
        "no_dump": list(analysis.no_dump),
        "suspects": [place(r) for r in analysis.suspects],
        "first": _finding(analysis.findings[0], place) if analysis.findings else None,
        "findings": [_finding(f, place) for f in analysis.findings],
        "groups": [{"name": g.name, "desc": g.desc, "members": list(g.members), "membership": g.membership,
                    "ranks": [{**place(r.rank), "last_enqueued": r.last_enqueued, "last_completed": r.last_completed,
                               "last_op": r.last_op, "last_state": r.last_state} for r in g.ranks]}
                   for g in analysis.groups],
    }


def _waiting(w: Waiting | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {"process_group": {"name": w.pg_name, "desc": w.pg_desc}, "seq_kind": w.seq_kind, "seq": w.seq,
            "op": w.op, "state": w.state}


def _finding(f: Finding, place) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "process_group": {"name": f.pg_name, "desc": f.pg_desc, "membership": f.membership},
        "seq_kind": f.seq_kind, "seq": f.seq, "op": f.op,
        "input_sizes": [list(s) for s in f.input_sizes], "dtypes": list(f.dtypes),
        "peer": {"src": f.peer[0], "dst": f.peer[1]} if f.peer else None,
        "members": list(f.members), "joined": list(f.joined), "missing": list(f.missing), "no_dump": list(f.no_dump),
        "time_created_ns": f.time_created_ns,
        "differences": [{"field": d.field, "values": [{"value": v, "ranks": list(rs)} for v, rs in d.values]}
                        for d in f.differences],
        "ranks": [{**place(s.rank), "joined": s.joined, "state": s.state, "retired": s.retired,
                   "last_enqueued": s.last_enqueued, "last_completed": s.last_completed, "last_op": s.last_op,
                   "last_state": s.last_state, "waiting_in": _waiting(s.waiting_in)} for s in f.ranks],
    }


def ranges(ranks: Iterable[int], limit: int = 16) -> str:
    """``0-3, 7, 9-12``; past ``limit`` runs, the rest is counted."""
    ordered = sorted(set(ranks))
    runs: list[tuple[int, int]] = []
    for r in ordered:
        if runs and r == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        rest = sum(b - a + 1 for a, b in runs[limit:])
        shown.append(f"... ({rest} more)")
    return ", ".join(shown)


def _who(rank: int, places: Mapping[int, Place]) -> str:
    p = places.get(rank)
    return f"rank {rank} ({p.node} gpu {p.gpu})" if p else f"rank {rank}"


def _ranks_phrase(ranks: Iterable[int], places: Mapping[int, Place]) -> str:
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return _who(ranks[0], places)
    if len(ranks) <= 4 and any(r in places for r in ranks):
        return ", ".join(_who(r, places) for r in ranks)
    return f"ranks {ranges(ranks)}"


def _group(f: Finding) -> str:
    return f"process group {f.pg_name} ({f.pg_desc})" if f.pg_desc and f.pg_desc != "undefined" \
        else f"process group {f.pg_name}"


def _op(f: Finding) -> str:
    what = f.op.partition(":")[2] or f.op
    number = f"#{f.seq}" if f.seq_kind == COLLECTIVE else f"(p2p #{f.seq})"
    shapes = " ".join(str([list(s) for s in f.input_sizes]).split()) if f.input_sizes else ""
    return " ".join(x for x in (what, number, shapes, ",".join(f.dtypes)) if x)


def summary(analysis: Analysis, places: Mapping[int, Place]) -> str:
    """One line: the first finding, or that there is none."""
    if not analysis.findings:
        return "no hang found: every collective in the dumps was joined by every member of its group"
    f = analysis.findings[0]
    if f.kind == MISSING:
        return f"{_ranks_phrase(f.missing, places)} did not join {_op(f)} of {_group(f)}"
    if f.kind == MISMATCH:
        values = f.differences[0].values
        tie = len(values[0][1]) == len(values[1][1])     # no majority: every side is named
        ranks = sorted({r for _, rs in (values if tie else values[1:]) for r in rs})
        return f"{_ranks_phrase(ranks, places)} called {_op(f)} of {_group(f)} differently ({f.differences[0].field})"
    if f.kind == NO_DUMP:
        return (f"{_op(f)} of {_group(f)} waits for {_ranks_phrase(f.no_dump, places)}, "
                f"which left no readable dump")
    return f"every member joined {_op(f)} of {_group(f)} and it never completed"


def _waiting_text(w: Waiting | None) -> str:
    if w is None:
        return "waits in no operation itself"
    number = f"#{w.seq}" if w.seq_kind == COLLECTIVE else f"p2p #{w.seq}"
    return f"itself waits in {w.op.partition(':')[2] or w.op} {number} of process group {w.pg_name} ({w.pg_desc})"


def _state_line(s: RankState, p2p: bool) -> str:
    number = "p2p #" if p2p else "#"
    last = (f"last enqueued {number}{s.last_enqueued}" if s.last_enqueued is not None else "nothing enqueued") + \
        (f", last completed {number}{s.last_completed}" if s.last_completed is not None else ", none seen completed")
    if s.joined:
        return f"joined, {s.state}{' (retired)' if s.retired else ''}; {last}"
    if s.joined is False:
        return f"DID NOT JOIN; {last}; {_waiting_text(s.waiting_in)}"
    return "no dump" if s.last_enqueued is None and s.last_op is None else f"joined (entry no longer in its buffer); {last}"


def _rank_lines(f: Finding, places: Mapping[int, Place], no_dump: set[int]) -> list[str]:
    lines: dict[str, list[int]] = defaultdict(list)
    for s in f.ranks:
        text = "no readable dump" if s.rank in no_dump else _state_line(s, f.seq_kind != COLLECTIVE)
        lines[text].append(s.rank)
    order = sorted(lines.items(), key=lambda kv: ("DID NOT" not in kv[0], "no readable" not in kv[0], kv[1][0]))
    out = [f"    {_ranks_phrase(ranks, places)}: {text}" for text, ranks in order[:RANK_LINES]]
    if len(order) > RANK_LINES:
        out.append(f"    ... and {sum(len(r) for _, r in order[RANK_LINES:])} more ranks (--json lists them all)")
    return out


def _describe(f: Finding, places: Mapping[int, Place], no_dump: set[int]) -> list[str]:
    head = {MISSING: "NOT JOINED BY EVERY RANK", MISMATCH: "MISMATCHED", NO_DUMP: "WAITING FOR RANKS WITHOUT A DUMP",
            STALLED: "STALLED WITH EVERY RANK IN IT"}[f.kind]
    lines = [f"{head}: {_op(f)} of {_group(f)}"]
    if f.peer:
        lines.append(f"  point-to-point: rank {f.peer[0]} sends to rank {f.peer[1]}")
    if f.membership == "inferred":
        lines.append("  members inferred from the dumps (no pg_config): a member that recorded nothing is not seen")
    for d in f.differences:
        values = "; ".join(f"{v} on {_ranks_phrase(rs, places)}" for v, rs in d.values)
        lines.append(f"  {d.field} differ: {values}")
    lines += _rank_lines(f, places, no_dump)
    return lines


def _next_steps(analysis: Analysis, places: Mapping[int, Place]) -> list[str]:
    f = analysis.findings[0]
    suspects = list(analysis.suspects) or list(f.missing) or list(f.no_dump)
    where = _ranks_phrase(suspects, places) if suspects else ""
    nodes = sorted({places[r].node for r in suspects if r in places})
    on_nodes = f" on {', '.join(nodes)}" if nodes else ""
    if f.kind == MISMATCH:
        return ["Next: this is the program, not the hardware. The ranks reached the same collective with a different",
                "  operation, shape or dtype: a rank-dependent branch, an uneven last batch, a model or config that",
                "  differs between ranks. Compare the code path of the odd ranks with the others at that call."]
    if f.kind == STALLED:
        return ["Next: no rank is holding the others back; the collective itself does not finish. Look at the fabric",
                "  and the GPUs of the group: InfiniBandLinkDown, PFCPauseStorm, GPUXidCritical, GPUFellOffBus for its",
                "  nodes; NCCL_DEBUG=INFO logs for retries and timeouts."]
    lines = [f"Next: {where} {'is' if len(suspects) == 1 else 'are'} what the others wait for." if where
             else "Next:"]
    lines += [f"  1. Hardware first{on_nodes}: GPUFellOffBus, GPUXidCritical, InfiniBandLinkDown alerts; the node",
              "     agent's GPU verdict; dmesg for XIDs.",
              "  2. The process: alive? py-spy dump --pid <pid> shows where its Python stands (data loader,",
              "     checkpoint, an exception, a deadlock before the collective). Gone? its log and exit status",
              "     (sacct -j <job> / kubectl describe pod): OOM-killed, crashed, preempted.",
              "  3. Requeue from the last checkpoint, excluding the node if it is at fault."]
    if f.kind == NO_DUMP or analysis.no_dump:
        lines.insert(1, "  A rank that leaves no dump usually died or was killed before its watchdog wrote one.")
    return lines


def text(analysis: Analysis, read: DirRead, places: Mapping[int, Place]) -> str:
    """The report for a person: the verdict, the first finding, the others, what to do next, the inputs."""
    no_dump = set(analysis.no_dump)
    out = [("HANG: " if analysis.hang else "") + summary(analysis, places)]
    if analysis.findings:
        out.append("")
        out += _describe(analysis.findings[0], places, no_dump)
        if analysis.suspects:
            out.append(f"  suspects (missing and waiting in nothing themselves): "
                       f"{_ranks_phrase(analysis.suspects, places)}")
        out.append("")
        out += _next_steps(analysis, places)
        for f in analysis.findings[1:1 + MORE_FINDINGS]:
            out.append("")
            out += _describe(f, places, no_dump)
        if len(analysis.findings) > 1 + MORE_FINDINGS:
            out += ["", f"... and {len(analysis.findings) - 1 - MORE_FINDINGS} more findings (--json lists them all)"]
    else:
        out += ["If the job is stuck anyway, every rank is stuck outside collectives (data loading, a checkpoint,",
                "a deadlock before the next collective), or the dumps were taken before it stopped."]
    out.append("")
    formats = sorted({d.fmt for d in read.dumps.values()})
    out.append(f"Dumps: {len(read.dumps)} read ({', '.join(formats) or 'none'}; Flight Recorder version "
               f"{', '.join(analysis.versions) or '?'}), {len(read.unreadable)} unreadable, "
               f"{len(analysis.no_dump)} of {len(analysis.world)} ranks without a readable dump"
               + (f" ({ranges(analysis.no_dump)})" if analysis.no_dump else ""))
    for u in read.unreadable:
        out.append(f"  unreadable: {u.file}: {u.reason}")
    return "\n".join(out) + "\n"
