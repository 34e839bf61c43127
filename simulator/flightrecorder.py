"""PyTorch Flight Recorder dumps of a simulated job, one file per rank, as the process-group watchdog
writes them on a collective timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT=1``): ``<prefix><rank>``, a pickle
of plain dicts, lists, tuples, strings and numbers (``FlightRecorder::dump``), or the JSON of
``FlightRecorder::dump_json``. Keys, value shapes and the JSON writer's differences (the process group
as a list, 0 for a time not discovered, status counters as strings, no ``frames``, no ``entries`` key
when there are none, keys sorted) follow ``torch/csrc/distributed/c10d/FlightRecorder.hpp`` and
``FlightRecorderDetail.hpp`` (dump version "2.10", torch 2.13). The values (times, thread ids, stack
frames) are made up.

The job runs ``steps`` training steps; in each, every process group issues its operation in creation
order (a collective over its members, or for ``op="send"`` a pipeline: group rank i sends to i + 1),
then the default group all-reduces the gradients. ``stop_rank`` stops before collective ``at_seq`` of
its ``stop_pg`` group and issues nothing more: stuck outside collectives (a data loader, a
checkpoint, a deadlock), its watchdog still dumps. A rank that issues an operation some member does
not join waits in it (in flight: ``scheduled``, or ``started`` with ``timing``) and issues nothing
after it, so the hang spreads as it does in a synchronous job. ``mismatch`` makes one rank call one
collective with another shape, dtype or operation; the collective then never completes. Ranks in
``no_dump`` write no file, as a process that died.

Imports nothing of the analytics: the simulator writes what PyTorch would, and the analytics read it.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

VERSION = "2.10"
PREFIX = "nccl_trace_rank_"
DEFAULT_DESC = "default_pg"
TIMEOUT_MS = 600_000          # ProcessGroupNCCL's default collective timeout (10 minutes)
T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
STEP_NS = 850_000_000
OP_NS = 4_000_000


@dataclass(frozen=True)
class Group:
    """One process group: its description (``group_desc``), member global ranks, and what it runs each
    step. ``op``: a collective (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``) or
    ``send`` for a pipeline of sends and receives between consecutive members. ``name``: by default the
    next number, as ``new_group`` names groups; groups made by one ``split_group`` call share a name."""
    desc: str
    ranks: tuple[int, ...]
    op: str = "all_reduce"
    shape: tuple[int, ...] = (4096, 1024)
    dtype: str = "BFloat16"
    name: str | None = None


@dataclass(frozen=True)
class Mismatch:
    """Rank ``rank`` calls collective ``seq`` of its ``desc`` group with another ``shape``, ``dtype`` or ``op``."""
    rank: int
    seq: int
    desc: str = DEFAULT_DESC
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    op: str | None = None


@dataclass
class _Pg:
    name: str
    spec: Group


def groups_from(pgs: Mapping[str, Sequence[Sequence[int]]] | Sequence[Group]) -> list[Group]:
    """``{"tp": [[0, 1], [2, 3]], ...}`` (all-reduce groups by description) or ``Group``s, as given."""
    if isinstance(pgs, Mapping):
        return [Group(desc, tuple(sorted(ranks))) for desc, lists in pgs.items() for ranks in lists]
    return list(pgs)


def write_dumps(directory: str | Path, ranks: int | Iterable[int], pgs: Mapping | Sequence[Group] = (), *,
                stop_rank: int | None = None, at_seq: int | None = None, stop_pg: str = DEFAULT_DESC,
                fmt: str = "json", steps: int = 6, mismatch: Mismatch | None = None, no_dump: Iterable[int] = (),
                buffer_size: int = 2000, timing: bool = False, prefix: str = PREFIX) -> list[Path]:
    """Write one dump per rank into ``directory`` (created); returns the paths written.

    ``ranks``: the world size or the global ranks. ``pgs``: the groups besides the default one (which
    PyTorch names ``"0"`` and every rank belongs to); they are named ``"1"``, ``"2"``... in order, as
    ``new_group`` names them. ``stop_rank``/``at_seq``/``stop_pg``: the rank that stops, before which
    collective of its group described ``stop_pg``. ``buffer_size``: entries each rank keeps (older ones
    are overwritten, as ``TORCH_FR_BUFFER_SIZE`` bounds the ring). ``timing``: as
    ``TORCH_NCCL_ENABLE_TIMING``, start times and durations are recorded."""
    if fmt not in ("json", "pickle"):
        raise ValueError(f"fmt: want json or pickle, got {fmt!r}")
    world = tuple(range(ranks)) if isinstance(ranks, int) else tuple(sorted(ranks))
    if (stop_rank is None) != (at_seq is None):
        raise ValueError("stop_rank and at_seq go together")
    pg_list = [_Pg("0", Group(DEFAULT_DESC, world))] + \
        [_Pg(g.name or str(i + 1), g) for i, g in enumerate(groups_from(pgs))]
    job = _Job(world, pg_list, timing)
    for step in range(steps):
        for pg in pg_list[1:] + pg_list[:1]:   # the model's groups, then the gradient all-reduce
            if pg.spec.op == "send":
                job.pipeline(pg, step)
            else:
                job.collective(pg, step, stop_rank, at_seq, stop_pg, mismatch)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    skip = set(no_dump)
    for rank in world:
        if rank in skip:
            continue
        path = out / f"{prefix}{rank}"
        doc = job.document(rank, buffer_size, fmt)
        if fmt == "json":
            path.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))
        else:
            path.write_bytes(pickle.dumps(doc, protocol=2))
        written.append(path)
    return written


class _Job:
    def __init__(self, world: tuple[int, ...], pgs: list[_Pg], timing: bool) -> None:
        self.world, self.pgs, self.timing = world, pgs, timing
        self.entries: dict[int, list[dict]] = {r: [] for r in world}
        self.blocked: set[int] = set()
        self.pg_ids = {r: {pg.name: i for i, pg in enumerate(p for p in pgs if r in p.spec.ranks)} for r in world}
        self.seq: dict[tuple[int, str], int] = {}      # (rank, group) → last collective_seq_id
        self.p2p: dict[tuple[int, str], int] = {}
        self.op_id: dict[tuple[int, str], int] = {}
        self.tick = 0

    def _now(self, step: int, rank: int) -> int:
        return T0_NS + step * STEP_NS + self.tick * OP_NS + rank * 1_000

    def collective(self, pg: _Pg, step: int, stop_rank: int | None, at_seq: int | None, stop_pg: str,
                   mismatch: Mismatch | None) -> None:
        self.tick += 1
        members = pg.spec.ranks
        if stop_rank in members and pg.spec.desc == stop_pg and self.seq.get((stop_rank, pg.name), 0) + 1 == at_seq:
            self.blocked.add(stop_rank)
        issuing = [r for r in members if r not in self.blocked]
        odd = mismatch is not None and mismatch.rank in issuing and mismatch.desc == pg.spec.desc and \
            self.seq.get((mismatch.rank, pg.name), 0) + 1 == mismatch.seq
        done = len(issuing) == len(members) and not odd
        for r in issuing:
            seq = self.seq[(r, pg.name)] = self.seq.get((r, pg.name), 0) + 1
            op, shape, dtype = pg.spec.op, pg.spec.shape, pg.spec.dtype
            if odd and r == mismatch.rank:
                op, shape, dtype = mismatch.op or op, mismatch.shape or shape, mismatch.dtype or dtype
            inputs, outputs = _shapes(op, shape, len(members))
            self._record(r, pg, step, seq, self.p2p.get((r, pg.name), 0), f"nccl:{op}", inputs, outputs, dtype,
                         done, is_p2p=False)
        if not done:
            self.blocked.update(issuing)

    def pipeline(self, pg: _Pg, step: int) -> None:
        members = pg.spec.ranks
        for i in range(len(members) - 1):
            self.tick += 1
            src, dst = members[i], members[i + 1]
            issuing = [r for r in (src, dst) if r not in self.blocked]
            done = len(issuing) == 2
            for r in issuing:
                p2p = self.p2p[(r, pg.name)] = self.p2p.get((r, pg.name), 0) + 1
                name = f"nccl:send {i}->{i + 1}" if r == src else f"nccl:recv {i + 1}<-{i}"
                shape = [list(pg.spec.shape)]
                self._record(r, pg, step, self.seq.get((r, pg.name), 0), p2p, name,
                             shape if r == src else [], [] if r == src else shape, pg.spec.dtype, done, is_p2p=True)
            if not done:
                self.blocked.update(issuing)

    def _record(self, rank: int, pg: _Pg, step: int, seq: int, p2p: int, name: str, inputs: list, outputs: list,
                dtype: str, done: bool, is_p2p: bool) -> None:
        op_id = self.op_id[(rank, pg.name)] = self.op_id.get((rank, pg.name), 0) + 1
        created = self._now(step, rank)
        entry = {
            "frames": [{"name": name.split(":")[1].split(" ")[0], "filename": "torch/distributed/distributed_c10d.py",
                        "line": 2806},
                       {"name": "train_step", "filename": "train.py", "line": 112},
                       {"name": "main", "filename": "train.py", "line": 240}],
            "record_id": len(self.entries[rank]), "pg_id": self.pg_ids[rank][pg.name],
            "process_group": (pg.name, pg.spec.desc), "thread_name": "pt_main_thread",
            "thread_id": str(139_800_000_000_000 + rank), "collective_seq_id": seq, "p2p_seq_id": p2p,
            "op_id": op_id, "profiling_name": name, "time_created_ns": created,
        }
        if done and self.timing:
            entry["duration_ms"] = 3.25
        entry.update({
            "input_sizes": inputs, "input_dtypes": [dtype] * len(inputs),
            "output_sizes": outputs, "output_dtypes": [dtype] * len(outputs),
            "state": "completed" if done else ("started" if self.timing else "scheduled"),
            "time_discovered_started_ns": created + 50_000 if self.timing else None,   # start events: timing only
            "time_discovered_completed_ns": created + 3_300_000 if done else None,
            "retired": done, "timeout_ms": TIMEOUT_MS, "is_p2p": is_p2p,
        })
        self.entries[rank].append(entry)

    def document(self, rank: int, buffer_size: int, fmt: str) -> dict:
        entries = self.entries[rank][-buffer_size:] if buffer_size else []
        mine = [pg for pg in self.pgs if rank in pg.spec.ranks]
        pg_config = {pg.name: {"name": pg.name, "desc": pg.spec.desc,
                               "ranks": "[" + ", ".join(map(str, pg.spec.ranks)) + "]"} for pg in mine}
        pg_status = {}
        for pg in mine:
            own = [e for e in self.entries[rank] if e["process_group"][0] == pg.name]
            if not own:
                continue       # the recorder keeps a group's status from its first record on
            enqueued = max(e["collective_seq_id"] for e in own)
            completed = max((e["collective_seq_id"] for e in own if e["state"] == "completed"), default=-1)
            started = max((e["collective_seq_id"] for e in own if e["state"] != "scheduled"), default=-1) \
                if self.timing else -1
            pg_status[str(self.pg_ids[rank][pg.name])] = {"last_enqueued_collective": enqueued,
                                                          "last_started_collective": started,
                                                          "last_completed_collective": completed}
        if fmt == "pickle":
            return {"version": VERSION, "pg_config": pg_config, "comm_lib_version": "", "pg_status": pg_status,
                    "entries": entries}
        json_entries = []
        for e in entries:   # what dump_json writes differently: no frames, lists for tuples, 0 for no time
            j = {k: v for k, v in e.items() if k != "frames"}
            j["process_group"] = list(e["process_group"])
            for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                j[k] = j[k] or 0
            json_entries.append(j)
        doc = {"version": VERSION, "comm_lib_version": "", "pg_config": pg_config,
               "pg_status": {k: {n: str(v) for n, v in s.items()} for k, s in pg_status.items()},
               "nccl_comm_state": {}}
        if json_entries:
            doc["entries"] = json_entries
        return doc


def _shapes(op: str, shape: tuple[int, ...], size: int) -> tuple[list, list]:
    """Input and output sizes as the recorder lists them: one shape per tensor."""
    first, rest = shape[0], list(shape[1:])
    if op == "all_gather":
        return [list(shape)], [[first * size, *rest]]
    if op == "reduce_scatter":
        return [list(shape)], [[max(1, first // size), *rest]]
    return [list(shape)], [list(shape)]
