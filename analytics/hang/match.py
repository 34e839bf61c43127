"""Matching the ranks' Flight Recorder entries across ranks, per process group: pure code over
``records`` (no I/O), in the spirit of PyTorch's own analyzer (``torch/distributed/flight_recorder``,
``fr_trace``) but written for one question: where did the job stop, and who stopped it.

A process group is known by its name (the same on every member; its ``pg_id`` is numbered per rank)
and, where ``pg_config`` gives them, its member ranks (groups made by ``split_group`` share a name
but not their members). Without ``pg_config`` (the gloo backend writes none) the default group holds
every rank and another group the ranks whose entries name it.

Collectives are matched by ``collective_seq_id``, which every member advances once per collective of
the group (the entries of one coalesced launch share it; point-to-point entries carry the current one
and advance ``p2p_seq_id`` instead). For each group, in sequence order:

- a rank whose last enqueued collective (its entries, or ``pg_status``) is below ``s`` did not join
  ``s``: the first such ``s`` is a *missing* finding. A rank whose ring buffer wrapped is not held
  to collectives created before its oldest entry: it may have joined them and lost the entry.
- ranks that called ``s`` with another operation, shapes or dtypes are a *mismatch* (shapes are not
  compared for the operations whose shapes differ between ranks by design: all-to-all, the ``_v``
  variants, gather's outputs, scatter's inputs).
- if every rank with a dump joined the first collective still in flight, and members have no
  readable dump, those are the suspects (*no_dump*); if every member joined it and none saw it
  complete, the job is *stalled* inside it (the fabric, a GPU, NCCL itself), not held by one rank.

Point-to-point operations are matched per direction (sends from a to b against receives on b from
a) in order; a send or receive still in flight with no counterpart on its peer is a *missing*
finding for the peer, and a pair with different shapes or dtypes a *mismatch*. Peers in the
profiling name (``nccl:send 0->1``) are group ranks: the i-th of the group's sorted global ranks.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from lockstep.analytics.hang.records import COMPLETED, RECV, SEND, Entry, PgConfig, RankDump

MISSING, MISMATCH, NO_DUMP, STALLED = "missing", "mismatch", "no_dump", "stalled"
KINDS = (MISSING, MISMATCH, NO_DUMP, STALLED)
COLLECTIVE, P2P = "collective", "p2p"
DEFAULT_PG_DESC = "default_pg"
# Shapes that legitimately differ between the ranks of one call.
_SHAPES_VARY = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "all_gather_v", "reduce_scatter_v"}
_OUTPUTS_VARY = {"gather"}      # only the root receives
_INPUTS_VARY = {"scatter"}      # only the root sends
FIELDS = ("op", "count", "input_sizes", "output_sizes", "dtypes")   # compared for a collective
P2P_FIELDS = ("sizes", "dtypes")                                     # for a send and its receive


@dataclass(frozen=True, slots=True)
class RankState:
    """One member of a finding's group: whether it joined the operation, and where it stood."""
    rank: int
    joined: bool | None            # None: no readable dump, or its entry fell out of a wrapped buffer
    state: str | None = None       # its entry's state (joined ranks)
    retired: bool | None = None
    last_enqueued: int | None = None   # the group's last sequence number it enqueued (p2p_seq_id for a p2p finding)
    last_completed: int | None = None  # ... and saw complete
    last_op: str | None = None     # profiling name of its last entry in the group
    last_state: str | None = None
    waiting_in: Waiting | None = None  # the oldest operation it is itself still waiting in, any group


@dataclass(frozen=True, slots=True)
class Waiting:
    pg_name: str
    pg_desc: str
    seq_kind: str
    seq: int
    op: str
    state: str


@dataclass(frozen=True, slots=True)
class Difference:
    field: str                                  # one of FIELDS, or of P2P_FIELDS
    values: tuple[tuple[str, tuple[int, ...]], ...]   # (value, ranks holding it), most ranks first


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    pg_name: str
    pg_desc: str
    seq_kind: str                  # COLLECTIVE or P2P
    seq: int                       # collective_seq_id, or p2p_seq_id of the rank that issued it
    op: str                        # profiling name, as most joined ranks wrote it
    members: tuple[int, ...]
    joined: tuple[int, ...]
    missing: tuple[int, ...]       # members with a dump that did not issue it
    no_dump: tuple[int, ...]       # members without a readable dump
    ranks: tuple[RankState, ...]
    time_created_ns: int | None    # earliest creation among the joined ranks' entries
    input_sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    differences: tuple[Difference, ...] = ()
    peer: tuple[int, int] | None = None     # (src, dst) global ranks of a point-to-point finding
    membership: str = "config"     # "config" (pg_config), "world" (the default group) or "inferred"


@dataclass(frozen=True, slots=True)
class GroupRank:
    rank: int
    last_enqueued: int | None
    last_completed: int | None
    last_op: str | None
    last_state: str | None


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    desc: str
    members: tuple[int, ...]
    membership: str
    ranks: tuple[GroupRank, ...]   # members with a readable dump


@dataclass(frozen=True, slots=True)
class Analysis:
    world: tuple[int, ...]         # every rank a dump, a file name or a group named
    dumps: tuple[int, ...]         # ranks with a readable dump
    no_dump: tuple[int, ...]       # ranks of ``world`` without one
    findings: tuple[Finding, ...]  # the first one first
    groups: tuple[Group, ...]      # the groups with entries
    versions: tuple[str, ...]
    suspects: tuple[int, ...] = ()  # the ranks the findings point at that wait in nothing themselves

    @property
    def hang(self) -> bool:
        return bool(self.findings)


@dataclass
class _Group:
    name: str
    desc: str
    members: tuple[int, ...]
    membership: str
    entries: dict[int, list[Entry]] = field(default_factory=dict)   # rank → its entries of the group
    pg_ids: dict[int, set[int]] = field(default_factory=dict)


def analyse(dumps: Mapping[int, RankDump], unreadable: Iterable[int] = (), world_size: int | None = None) -> Analysis:
    """Match ``dumps`` (rank → its dump). ``unreadable``: ranks whose file exists but could not be read;
    ``world_size``: the job's size where known, so that ranks without any file count as without a dump."""
    world = set(dumps) | set(unreadable) | set(range(world_size or 0))
    for d in dumps.values():
        for cfg in d.pg_config.values():
            world.update(cfg.ranks)
    world_t = tuple(sorted(world)) if world else ()
    groups = _groups(dumps, world_t)
    waiting = {r: _waiting(d) for r, d in dumps.items()}
    findings: list[Finding] = []
    summaries = []
    for g in groups:
        if not g.entries:
            continue          # named in pg_config only: nothing it did to match
        views = {r: _view(g, r, dumps[r]) for r in g.members if r in dumps}
        findings.extend(_collectives(g, dumps, views, waiting))
        findings.extend(_p2p(g, dumps, views, waiting))
        summaries.append(_summary(g, views))
    strong = sorted((f for f in findings if f.kind != STALLED), key=_order)
    weak = sorted((f for f in findings if f.kind == STALLED), key=_order)
    return Analysis(world_t, tuple(sorted(dumps)), tuple(r for r in world_t if r not in dumps),
                    tuple(strong + weak), tuple(summaries), tuple(sorted({d.version for d in dumps.values()})),
                    _suspects(strong, waiting))


def _waiting(d: RankDump) -> Waiting | None:
    for e in d.entries:          # oldest first
        if e.in_flight:
            kind, seq = (P2P, e.p2p_seq_id) if e.is_p2p else (COLLECTIVE, e.collective_seq_id)
            return Waiting(e.pg_name, e.pg_desc, kind, seq, e.profiling_name, e.state)
    return None


def _suspects(findings: Sequence[Finding], waiting: Mapping[int, Waiting | None]) -> tuple[int, ...]:
    """The ranks the others wait for: those that did not join and wait in no operation themselves (a rank
    that missed a collective because it waits in another group's is a victim). Where the dumps show
    none, the ranks without a readable dump that findings wait for: nothing clears them."""
    seen: dict[int, None] = {}
    for f in findings:
        if f.kind == MISSING:
            for r in f.missing:
                if waiting.get(r) is None:
                    seen.setdefault(r)
    if not seen:
        for f in findings:
            if f.kind in (MISSING, NO_DUMP):
                for r in f.no_dump:
                    seen.setdefault(r)
    return tuple(seen)


def _order(f: Finding) -> tuple:
    return (f.time_created_ns is None, f.time_created_ns or 0, KINDS.index(f.kind), f.pg_name, f.seq)


def _groups(dumps: Mapping[int, RankDump], world: tuple[int, ...]) -> list[_Group]:
    """Every process group seen, keyed by name and members, with each rank's entries assigned to it."""
    configured: dict[tuple[str, tuple[int, ...]], _Group] = {}
    for rank, d in sorted(dumps.items()):
        for cfg in d.pg_config.values():
            if cfg.ranks and rank in cfg.ranks:
                configured.setdefault((cfg.name, cfg.ranks), _Group(cfg.name, cfg.desc, cfg.ranks, "config"))
    inferred: dict[str, _Group] = {}
    for rank, d in sorted(dumps.items()):
        for e in d.entries:
            g = _own_group(rank, e, d.pg_config.get(e.pg_name), configured, inferred, world)
            g.entries.setdefault(rank, []).append(e)
            g.pg_ids.setdefault(rank, set()).add(e.pg_id)
    for g in inferred.values():
        if g.membership == "inferred":
            g.members = tuple(sorted(g.entries))
    return sorted([*configured.values(), *inferred.values()], key=lambda g: (_name_key(g.name), g.members))


def _name_key(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def _own_group(rank: int, e: Entry, cfg: PgConfig | None, configured: dict, inferred: dict[str, _Group],
               world: tuple[int, ...]) -> _Group:
    if cfg is not None and cfg.ranks and rank in cfg.ranks:
        return configured[(cfg.name, cfg.ranks)]
    holding = [g for (name, ranks), g in configured.items() if name == e.pg_name and rank in ranks]
    if len(holding) == 1:
        return holding[0]
    if e.pg_name not in inferred:
        default = e.pg_desc == DEFAULT_PG_DESC
        inferred[e.pg_name] = _Group(e.pg_name, e.pg_desc, world if default else (),
                                     "world" if default else "inferred")
    return inferred[e.pg_name]


@dataclass
class _RankView:
    """One member's collectives in one group."""
    by_seq: dict[int, list[Entry]]
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None
    last: Entry | None
    wrapped: bool
    oldest_ns: int | None
    p2p_last_enqueued: int | None
    p2p_last_completed: int | None


def _view(g: _Group, rank: int, d: RankDump) -> _RankView:
    entries = g.entries.get(rank, [])
    by_seq: dict[int, list[Entry]] = defaultdict(list)
    for e in entries:
        if not e.is_p2p:
            by_seq[e.collective_seq_id].append(e)
    statuses = [d.pg_status[i] for i in g.pg_ids.get(rank, ()) if i in d.pg_status]
    seen = list(by_seq)
    done = [s for s, es in by_seq.items() if all(e.state == COMPLETED for e in es)]
    started = [s for s, es in by_seq.items() if any(e.state != "scheduled" for e in es)]
    p2p = [e for e in entries if e.is_p2p and e.p2p is not None]
    return _RankView(
        dict(by_seq),
        _max(seen + [s.last_enqueued for s in statuses]),
        _max(started + [s.last_started for s in statuses]),
        _max(done + [s.last_completed for s in statuses]),
        entries[-1] if entries else None,
        d.wrapped, d.entries[0].time_created_ns if d.entries else None,
        _max([e.p2p_seq_id for e in p2p]), _max([e.p2p_seq_id for e in p2p if e.state == COMPLETED]))


def _max(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _collectives(g: _Group, dumps: Mapping[int, RankDump], views: Mapping[int, _RankView],
                 waiting: Mapping[int, Waiting | None]) -> list[Finding]:
    observed = [r for r in g.members if r in dumps]
    no_dump = tuple(r for r in g.members if r not in dumps)
    if not observed:
        return []
    seqs = sorted({s for v in views.values() for s in v.by_seq})
    out: list[Finding] = []
    missing_found = mismatch_found = False
    for s in seqs:
        holders = {r: v.by_seq[s] for r, v in views.items() if s in v.by_seq}
        created = min(e.time_created_ns for es in holders.values() for e in es)
        not_joined = tuple(r for r, v in views.items() if s not in v.by_seq and _did_not_join(v, s, created))
        if not mismatch_found and len(holders) > 1:
            diffs = _differences(holders)
            if diffs:
                mismatch_found = True
                out.append(_finding(MISMATCH, g, COLLECTIVE, s, holders, (), no_dump, views, waiting, created, diffs))
        if not missing_found and not_joined:
            missing_found = True
            out.append(_finding(MISSING, g, COLLECTIVE, s, holders, not_joined, no_dump, views, waiting, created))
        if missing_found and mismatch_found:
            break
    if missing_found:
        return out
    mismatched = {f.seq for f in out}
    # Every member with a dump joined everything: is a collective still in flight, and why?
    for s in seqs:
        holders = {r: v.by_seq[s] for r, v in views.items() if s in v.by_seq}
        if not any(e.in_flight for es in holders.values() for e in es):
            continue
        created = min(e.time_created_ns for es in holders.values() for e in es)
        if s in mismatched:
            break             # the mismatch is why it does not complete
        if no_dump:
            out.append(_finding(NO_DUMP, g, COLLECTIVE, s, holders, (), no_dump, views, waiting, created))
        elif len(holders) == len(observed) and not any(e.state == COMPLETED for es in holders.values() for e in es):
            out.append(_finding(STALLED, g, COLLECTIVE, s, holders, (), no_dump, views, waiting, created))
        break
    return out


def _did_not_join(v: _RankView, s: int, created_ns: int) -> bool:
    """True where the rank's own record says it never enqueued collective ``s``."""
    if v.last_enqueued is not None and s <= v.last_enqueued:
        return False          # enqueued (its entry may have been overwritten, or never recorded)
    if v.wrapped and (v.oldest_ns is None or created_ns < v.oldest_ns):
        return False          # created before the oldest entry its buffer still holds: cannot tell
    return True


def _shapes(sizes: tuple[tuple[int, ...], ...]) -> str:
    return str([list(shape) for shape in sizes])


def _signature(op: str, es: list[Entry]) -> tuple:
    """What must agree between the ranks of one collective, field by field (``None``: not compared)."""
    inputs = None if op in _SHAPES_VARY | _INPUTS_VARY else tuple(e.input_sizes for e in es)
    outputs = None if op in _SHAPES_VARY | _OUTPUTS_VARY else tuple(e.output_sizes for e in es)
    dtypes = frozenset(t for e in es for t in (*e.input_dtypes, *e.output_dtypes)) or None
    return tuple(e.op for e in es), len(es), inputs, outputs, dtypes


def _show(name: str, value) -> str:
    if name == "op":
        return " + ".join(value)
    if name == "count":
        return str(value)
    if name == "dtypes":
        return ",".join(sorted(value))
    return " + ".join(_shapes(sizes) for sizes in value)


def _differences(holders: Mapping[int, list[Entry]]) -> tuple[Difference, ...]:
    ops = Counter(es[0].op for es in holders.values())
    common_op = ops.most_common(1)[0][0]
    sigs = {r: _signature(common_op, es) for r, es in holders.items()}
    if len(set(sigs.values())) == 1:
        return ()
    diffs = []
    for i, name in enumerate(FIELDS):
        values: dict = defaultdict(list)
        for r, sig in sigs.items():
            if sig[i] is not None:     # a rank without dtypes (a non-root of gather/scatter) has nothing to compare
                values[sig[i]].append(r)
        if len(values) > 1:
            ordered = sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[1]))
            diffs.append(Difference(name, tuple((_show(name, value), tuple(ranks)) for value, ranks in ordered)))
    return tuple(diffs)


def _finding(kind: str, g: _Group, seq_kind: str, seq: int, holders: Mapping[int, list[Entry]],
             missing: tuple[int, ...], no_dump: tuple[int, ...], views: Mapping[int, _RankView],
             waiting: Mapping[int, Waiting | None], created: int | None, diffs: tuple[Difference, ...] = (),
             peer: tuple[int, int] | None = None) -> Finding:
    """``holders``: the joined ranks' entries; a point-to-point finding's members are its two peers."""
    members = g.members if peer is None else tuple(sorted(set(peer)))
    names = Counter(es[0].profiling_name for es in holders.values())
    op = names.most_common(1)[0][0] if names else ""
    sample = next((es[0] for es in holders.values() if es[0].profiling_name == op), None)
    states = []
    for r in members:
        v = views.get(r)
        last = v.last if v else None
        if v is None:
            enqueued = completed = None
        elif seq_kind == P2P:
            enqueued, completed = v.p2p_last_enqueued, v.p2p_last_completed
        else:
            enqueued, completed = v.last_enqueued, v.last_completed
        common = dict(last_enqueued=enqueued, last_completed=completed,
                      last_op=last.profiling_name if last else None, last_state=last.state if last else None,
                      waiting_in=waiting.get(r))
        if r in holders:
            e = holders[r][-1]
            states.append(RankState(r, True, e.state, e.retired, **common))
        elif r in missing:
            states.append(RankState(r, False, **common))
        else:
            states.append(RankState(r, None, **common))
    joined = tuple(sorted(holders))
    if seq_kind == COLLECTIVE:   # ranks whose entry was overwritten but whose counters say they enqueued it
        joined = tuple(sorted(set(joined) | {r for r, v in views.items() if r not in missing
                                             and v.last_enqueued is not None and seq <= v.last_enqueued}))
    return Finding(kind, g.name, g.desc, seq_kind, seq, op, members, joined, missing, no_dump, tuple(states),
                   created, sample.input_sizes if sample else (),
                   tuple(dict.fromkeys((*sample.input_dtypes, *sample.output_dtypes))) if sample else (),
                   diffs, peer, g.membership)


def _p2p(g: _Group, dumps: Mapping[int, RankDump], views: Mapping[int, _RankView],
         waiting: Mapping[int, Waiting | None]) -> list[Finding]:
    """Sends against receives per direction; the first unmatched in-flight operation or mismatched pair."""
    members = g.members
    if not members:
        return []
    ops: dict[tuple[int, int], dict[str, list[Entry]]] = defaultdict(lambda: {SEND: [], RECV: []})
    for rank, entries in g.entries.items():
        for e in entries:
            p = e.p2p if e.is_p2p else None
            if p is None:
                continue
            kind, src, dst = p
            if not (src < len(members) and dst < len(members)):
                continue      # group ranks outside the group's members: nothing to pair it with
            src_g, dst_g = members[src], members[dst]
            if rank != (src_g if kind == SEND else dst_g):
                continue      # the profiling name says another rank issued it
            ops[(src_g, dst_g)][kind].append(e)
    out: dict[str, Finding] = {}
    for (src, dst), both in sorted(ops.items()):
        sends, recvs = _aligned(both[SEND], both[RECV], dumps.get(src), dumps.get(dst))
        for a, b in zip(sends, recvs):
            diffs = _p2p_differences(src, a, dst, b)
            if diffs and MISMATCH not in out:
                out[MISMATCH] = _finding(MISMATCH, g, P2P, a.p2p_seq_id, {src: [a], dst: [b]}, (), (), views,
                                         waiting, min(a.time_created_ns, b.time_created_ns), diffs, (src, dst))
        surplus = [(src, dst, e) for e in sends[len(recvs):]] + [(dst, src, e) for e in recvs[len(sends):]]
        for issuer, peer, e in surplus:
            if not e.in_flight:
                continue
            seen = peer in dumps
            candidate = _finding(MISSING if seen else NO_DUMP, g, P2P, e.p2p_seq_id, {issuer: [e]},
                                 (peer,) if seen else (), () if seen else (peer,), views, waiting, e.time_created_ns,
                                 peer=(src, dst))
            kind = candidate.kind
            if kind not in out or _order(candidate) < _order(out[kind]):
                out[kind] = candidate
            break
    return list(out.values())


def _aligned(sends: list[Entry], recvs: list[Entry], a: RankDump | None, b: RankDump | None
             ) -> tuple[list[Entry], list[Entry]]:
    """Both lists from the same first operation: where a ring buffer wrapped, only what both still hold."""
    if not ((a and a.wrapped) or (b and b.wrapped)):
        return sends, recvs
    cutoff = max(d.entries[0].time_created_ns for d in (a, b) if d and d.entries)
    return [e for e in sends if e.time_created_ns >= cutoff], [e for e in recvs if e.time_created_ns >= cutoff]


def _p2p_differences(src: int, send: Entry, dst: int, recv: Entry) -> tuple[Difference, ...]:
    diffs = []
    if send.input_sizes != recv.output_sizes:
        diffs.append(Difference("sizes", ((_shapes(send.input_sizes), (src,)),
                                          (_shapes(recv.output_sizes), (dst,)))))
    sd, rd = set(send.input_dtypes), set(recv.output_dtypes)
    if sd and rd and sd != rd:
        diffs.append(Difference("dtypes", ((",".join(sorted(sd)), (src,)), (",".join(sorted(rd)), (dst,)))))
    return tuple(diffs)


def _summary(g: _Group, views: Mapping[int, _RankView]) -> Group:
    rows = []
    for r in g.members:
        v = views.get(r)
        if v is None:
            continue
        rows.append(GroupRank(r, v.last_enqueued, v.last_completed,
                              v.last.profiling_name if v.last else None, v.last.state if v.last else None))
    return Group(g.name, g.desc, g.members, g.membership, tuple(rows))
