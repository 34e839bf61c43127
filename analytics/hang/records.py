"""What one rank's Flight Recorder dump holds, as plain frozen dataclasses: its process groups (name,
description, member ranks), their status counters, and its entries (one per collective or
point-to-point operation it issued, oldest first). ``dump`` builds them; ``match`` reads them.

Field names follow the keys PyTorch writes (``torch/csrc/distributed/c10d/FlightRecorder.hpp``), with
the JSON writer's stand-ins for absent values undone: ``time_discovered_*_ns`` of 0 and status
counters of -1 are ``None`` here, and ``process_group`` is split into ``pg_name`` and ``pg_desc``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# States an entry can be in, as the recorder writes them: enqueued, its kernel seen running, seen done.
SCHEDULED, STARTED, COMPLETED = "scheduled", "started", "completed"
STATES = (SCHEDULED, STARTED, COMPLETED)
SEND, RECV = "send", "recv"
_P2P_NAME = re.compile(r"^(send) (\d+)->(\d+)$|^(recv) (\d+)<-(\d+)$")


@dataclass(frozen=True, slots=True)
class Entry:
    record_id: int
    pg_id: int                      # the process group's id on this rank only (ranks number them apart)
    pg_name: str                    # the group's name, the same on every member
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str             # "<backend>:<op>", e.g. "nccl:all_reduce", "nccl:send 0->1"
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    state: str
    retired: bool                   # the watchdog let go of it (done, failed or timed out)
    is_p2p: bool
    time_created_ns: int
    timeout_ms: int | None = None
    duration_ms: float | None = None
    time_discovered_started_ns: int | None = None
    time_discovered_completed_ns: int | None = None

    @property
    def op(self) -> str:
        """The operation without its backend and peers: ``all_reduce``, ``send``, ``coalesced``."""
        name = self.profiling_name.partition(":")[2] or self.profiling_name
        return name.split(" ", 1)[0]

    @property
    def backend(self) -> str:
        return self.profiling_name.partition(":")[0] if ":" in self.profiling_name else ""

    @property
    def p2p(self) -> tuple[str, int, int] | None:
        """``(send|recv, src, dst)`` in group ranks for a send or a receive, else None."""
        m = _P2P_NAME.match(self.profiling_name.partition(":")[2])
        if not m:
            return None
        if m.group(1):
            return SEND, int(m.group(2)), int(m.group(3))
        return RECV, int(m.group(6)), int(m.group(5))

    @property
    def in_flight(self) -> bool:
        """Still held by the watchdog and not seen completed: what a rank is waiting in."""
        return not self.retired and self.state != COMPLETED


@dataclass(frozen=True, slots=True)
class PgConfig:
    name: str
    desc: str
    ranks: tuple[int, ...]          # global ranks, sorted; empty where the recorder wrote none


@dataclass(frozen=True, slots=True)
class PgStatus:
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True, slots=True)
class RankDump:
    rank: int                       # from the file name: PyTorch writes <prefix><global rank>
    file: str
    fmt: str                        # "json" or "pickle"
    version: str
    pg_config: dict[str, PgConfig]  # by group name
    pg_status: dict[int, PgStatus]  # by this rank's pg_id
    entries: tuple[Entry, ...]

    @property
    def wrapped(self) -> bool:
        """The ring buffer overwrote older entries (record ids start at 0)."""
        return bool(self.entries) and self.entries[0].record_id > 0
