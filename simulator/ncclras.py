"""A simulated NCCL RAS service: what ``localhost:28028`` answers on a node of a running NCCL job.

``RasJob`` is a synchronous data-parallel job as NCCL's RAS sees it: one process per GPU, a world
communicator issuing AllReduce on every step and, optionally, one communicator per node issuing AllGather and
ReduceScatter (tensor parallelism within the node). Each rank's collective counts advance with the job's
steps. A rank can stop entering collectives (its counts freeze while it still answers RAS), its process can
stop answering (a missing, unresponsive rank) and then be considered dead; the ranks that wait on a stopped
rank go at most ``lead`` steps further and then wait too, as a synchronous job does.

``RasService`` serves a job on 127.0.0.1 (an ephemeral port) with NCCL's client protocol and formats, written
after NCCL's own writers in ``src/ras/client_support.cc`` (``tests/fixtures/nccl-ras/`` names the version):
``CLIENT PROTOCOL`` / ``SERVER PROTOCOL 2``, ``TIMEOUT``, ``SET FORMAT`` (NCCL 2.28.7 and later; earlier
versions answer ``ERROR: Unknown command``), ``STATUS`` and ``VERBOSE STATUS`` (the text answer, or the JSON one,
with the missing comma of NCCL 2.28.7 and 2.28.9), and ``MONITOR`` (2.29 and later: ``PEER_DEAD`` events).
The simulated versions are 2.26 and later (per-collective counts).

For ``lockstep sim run`` a node's service is ``node_service(job, version)``; the run sets every rank's steps and
whether RAS reaches its process from the model at each tick (``follow``; ``simulator/collectives.py``).
"""
from __future__ import annotations

import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from lockstep.exporters.catalog.nccl import COLLECTIVES

PROTOCOL = 2
CUDA_VERSION = "12.9"          # "compiled with CUDA"
CUDA_RUNTIME = CUDA_DRIVER = 12090
DEFAULT_VERSION = "2.30.7"
FIRST_VERSION = (2, 26, 0)     # per-collective counts in the text answer
FIRST_JSON = (2, 28, 7)
COMMA_FIXED = FIRST_MONITOR = (2, 29, 2)
RECV_BUFFER = 1024             # rasClient.recvBuffer: a longer line closes the connection

# Outliers (client_support.cc): at most 10 members and a quarter of the total; verbose: under half the total.
DETAIL_THRESHOLD, OUTLIER_FRACTION, VERBOSE_OUTLIER_FRACTION = 10, 0.25, 0.5
STATUS_WORDS = ("NOCOMM", "INIT", "RUNNING", "FINALIZE", "ABORT")
ERROR_WORDS = ("OK", "MISMATCH", "ERROR", "ERROR,MISMATCH", "INCOMPLETE", "INCOMPLETE,MISMATCH", "INCOMPLETE,ERROR",
               "INCOMPLETE,ERROR,MISMATCH")
RUNNING, MISMATCH, ERROR, INCOMPLETE = 4, 1, 2, 4
NCCL_ERROR_WORDS = {1: "Unhandled CUDA error", 2: "System error", 3: "Internal error", 4: "Invalid argument",
                    5: "Invalid usage", 6: "Remote process error", 7: "NCCL operation in progress"}


def version_tuple(version: str) -> tuple[int, int, int]:
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"NCCL version {version!r}: expected MAJOR.MINOR.PATCH")
    return int(parts[0]), int(parts[1]), int(parts[2])


def _hash64(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big")


@dataclass(frozen=True)
class SimProcess:
    rank: int                 # the world rank; one GPU per process
    host: str
    port: int                 # its RAS listening port: peers sort by address, then port
    pid: int
    cuda_dev: int
    nvml_dev: int


@dataclass
class SimComm:
    name: str
    hash: int
    secondary: tuple[int, int]
    members: tuple[int, ...]              # world ranks, by communicator rank
    base: dict[str, int]                  # counts at step 0
    per_step: dict[str, int]              # counts each step adds


@dataclass
class RasJob:
    """``nodes``: the address NCCL knows each node by (RAS prints IP addresses)."""

    nodes: Sequence[str]
    gpus_per_node: int = 8
    node_comms: bool = True
    lead: int = 1
    seed: int = 0
    visible_devices_per_process: bool = False   # CUDA_VISIBLE_DEVICES per process: every CUDA device 0
    allreduce_per_step: int = 4
    step: int = 0
    processes: list[SimProcess] = field(init=False)
    comms: list[SimComm] = field(init=False)
    stopped: dict[int, int] = field(init=False, default_factory=dict)       # rank -> the step it stopped at
    unresponsive: set[int] = field(init=False, default_factory=set)
    dead: set[int] = field(init=False, default_factory=set)
    async_errors: dict[int, int] = field(init=False, default_factory=dict)
    entered: tuple[int, ...] | None = field(init=False, default=None)   # per rank, set by ``follow``
    lock: threading.RLock = field(init=False, default_factory=threading.RLock, repr=False)
    listeners: list = field(init=False, default_factory=list, repr=False)   # called with each newly dead rank

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        self.processes = [SimProcess(r, self.nodes[r // g], 40000 + r % g, 100000 + 1000 * (r // g) + r % g,
                                     0 if self.visible_devices_per_process else r % g, r % g)
                          for r in range(len(self.nodes) * g)]
        world = tuple(range(len(self.processes)))
        self.comms = [self._comm("world", world, {"Broadcast": 1}, {"AllReduce": self.allreduce_per_step})]
        if self.node_comms and g > 1:
            self.comms += [self._comm(f"node{n}", tuple(range(n * g, (n + 1) * g)), {},
                                      {"AllGather": 2, "ReduceScatter": 1}) for n in range(len(self.nodes))]
        self.comms.sort(key=lambda c: (c.hash, c.secondary))   # rasCollComms: sorted by communicator id

    def _comm(self, name: str, members: tuple[int, ...], base: dict[str, int], per_step: dict[str, int]) -> SimComm:
        return SimComm(name, _hash64(self.seed, name), (_hash64(self.seed, name, "host"),
                                                        _hash64(self.seed, name, "pid")), members, base, per_step)

    # What happens to the job.

    def advance(self, steps: int = 1) -> None:
        with self.lock:
            self.step += steps

    def stop_entering(self, rank: int) -> None:
        """The rank's process stops entering collectives (a hang outside NCCL); it still answers RAS."""
        with self.lock:
            self.stopped.setdefault(rank, self.step)

    def kill(self, rank: int) -> None:
        """The rank's process stops answering: missing from every communicator, unresponsive."""
        with self.lock:
            self.stopped.setdefault(rank, self.step)
            self.unresponsive.add(rank)

    def declare_dead(self, rank: int) -> None:
        """RAS gave up on the process (after RAS_PEER_DEAD_TIMEOUT, 60 s): considered dead."""
        with self.lock:
            self.kill(rank)
            if rank not in self.dead:
                self.dead.add(rank)
                for listener in list(self.listeners):
                    listener(self.processes[rank])

    def wait_on_dead_peer(self, rank: int) -> None:
        """A peer dies and every communicator holding it waits on it: its ranks freeze ``lead`` steps on."""
        self.declare_dead(rank)

    def follow(self, entered: Sequence[int], unresponsive: Sequence[int], dead: Sequence[int]) -> None:
        """Each rank's steps entered, and the ranks RAS gets no answer from and those it considers dead, as
        a model says (``lockstep sim run``): replaces what ``advance`` and the fault methods set."""
        with self.lock:
            self.entered = tuple(int(e) for e in entered)
            self.step = max(self.entered, default=0)
            newly = set(dead) - self.dead
            self.unresponsive, self.dead = set(unresponsive) | set(dead), set(dead)
            for rank in sorted(newly):
                for listener in list(self.listeners):
                    listener(self.processes[rank])

    def set_async_error(self, rank: int, code: int) -> None:
        """What ncclCommGetAsyncError would return on the rank (an ncclResult_t code)."""
        with self.lock:
            self.async_errors[rank] = code

    # What RAS reports.

    def effective_step(self, rank: int) -> int:
        if self.entered is not None:
            return self.entered[rank]
        if rank in self.stopped:
            return self.stopped[rank]
        blocked = min(self.stopped.values(), default=None)
        return self.step if blocked is None else min(self.step, blocked + self.lead)

    def counts(self, comm: SimComm, rank: int) -> dict[str, int]:
        step = self.effective_step(rank)
        return {name: comm.base.get(name, 0) + comm.per_step.get(name, 0) * step for name in COLLECTIVES}

    def missing(self, rank: int) -> bool:
        return rank in self.unresponsive


def _devs(cuda: Sequence[int], nvml: Sequence[int]) -> str:
    """rasGpuDevsToString: the CUDA devices, and the NVML ones where they differ."""
    text = ",".join(map(str, cuda))
    return text if list(cuda) == list(nvml) else f"{text} (NVML {','.join(map(str, nvml))})"


def _gpu(cuda: int, nvml: int) -> str:
    """rasGpuToString."""
    return str(cuda) if cuda == nvml else f"{cuda} (NVML {nvml})"


def _outlier(count: int, verbose: bool, total: int = -1) -> bool:
    """rasCountIsOutlier."""
    if count == 1:
        return True
    if verbose:
        return count < total * VERBOSE_OUTLIER_FRACTION if total != -1 else True
    return count <= DETAIL_THRESHOLD and (total == -1 or count <= total * OUTLIER_FRACTION)


def _plural(n: int, suffix: str = "s") -> str:
    return suffix if n > 1 else ""


# ---------------------------------------------------------------------------------------------- JSON

def render_json(job: RasJob, version: str = DEFAULT_VERSION, collection_seconds: float = 0.004,
                timestamp: str | None = None) -> str:
    """rasDumpCommsToJSON, line for line."""
    comma_fixed = version_tuple(version) >= COMMA_FIXED
    stamp = timestamp or time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    out = ["{\n", f'  "nccl_version": "{version}",\n', f'  "cuda_runtime_version": {CUDA_RUNTIME},\n',
           f'  "cuda_driver_version": {CUDA_DRIVER},\n', f'  "timestamp": "{stamp}",\n']
    with job.lock:
        comms = [c for c in job.comms if any(not job.missing(r) for r in c.members)]
        out += [f'  "communicators_count": {len(comms)},\n', '  "communicators": [\n']
        for i, comm in enumerate(comms):
            ranks = [(cr, r) for cr, r in enumerate(comm.members) if not job.missing(r)]
            lost = [(cr, r) for cr, r in enumerate(comm.members) if job.missing(r)]
            if i:
                out.append(",\n")
            out += ["    {\n", f'      "hash": "0x{comm.hash:x}",\n',
                    f'      "secondary_hash": "0x{comm.secondary[0]:x}:0x{comm.secondary[1]:x}",\n',
                    f'      "size": {len(comm.members)},\n', f'      "ranks_count": {len(ranks)},\n',
                    f'      "missing_ranks_count": {len(lost)},\n', '      "ranks": [\n']
            for j, (cr, r) in enumerate(ranks):
                p = job.processes[r]
                if j:
                    out.append(",\n")
                out += ["        {\n", f'          "rank": {cr},\n', f'          "host": "{p.host}",\n',
                        f'          "pid": {p.pid},\n', f'          "cuda_dev": {p.cuda_dev},\n',
                        f'          "nvml_dev": {p.nvml_dev},\n', '          "status": {\n',
                        '            "init_state": 0,\n',
                        f'            "async_error": {job.async_errors.get(r, 0)},\n',
                        '            "finalize_called": false,\n', '            "destroy_flag": false,\n',
                        '            "abort_flag": false\n', "          },\n", '          "collective_counts": {\n']
                counts = job.counts(comm, r)
                out.append(",\n".join(f'            "{name}": {counts[name]}' for name in COLLECTIVES) + "\n")
                out += ["          }\n", "        }"]
            out.append("\n      ],\n")
            out.append('      "missing_ranks": [\n')
            for j, (cr, r) in enumerate(lost):
                p = job.processes[r]
                if j:
                    out.append(",\n")
                out += ["        {\n", f'          "rank": {cr},\n', f'          "host": "{p.host}",\n',
                        f'          "pid": {p.pid},\n', f'          "cuda_dev": {p.cuda_dev},\n',
                        f'          "nvml_dev": {p.nvml_dev}{"," if comma_fixed else ""}\n',
                        '          "status": {\n', '            "unresponsive": true,\n',
                        f'            "considered_dead": {"true" if r in job.dead else "false"}\n',
                        "          }\n", "        }"]
            out += ["\n      ]\n", "    }"]
        timeouts = _timeouts(job)
    out += ["\n  ],\n", '  "ras": {\n', f'    "collection_time_sec": {collection_seconds:.3f},\n',
            f'    "timeouts_count": {timeouts}\n', "  }\n", "}\n"]
    return "".join(out)


def _timeouts(job: RasJob) -> int:
    """Leg timeouts while gathering: one per process that does not answer and is not yet given up on (a model)."""
    return len(job.unresponsive - job.dead)


# ---------------------------------------------------------------------------------------------- text

@dataclass
class _Aux:
    comm: SimComm
    ranks: list[tuple[int, int]]      # (comm rank, world rank) that answered, by peer then comm rank
    lost: list[tuple[int, int]]
    nodes: int = 0
    per_node_min: int = 0
    per_node_max: int = 0
    status: int = RUNNING
    errors: int = 0


def _aux(job: RasJob, comm: SimComm) -> _Aux:
    order = {p.rank: (p.host, p.port) for p in job.processes}
    ranks = sorted(((cr, r) for cr, r in enumerate(comm.members) if not job.missing(r)),
                   key=lambda x: (order[x[1]], x[0]))
    aux = _Aux(comm, ranks, [(cr, r) for cr, r in enumerate(comm.members) if job.missing(r)])
    per_node: dict[str, int] = {}
    for _, r in ranks:
        per_node[job.processes[r].host] = per_node.get(job.processes[r].host, 0) + 1
    aux.nodes = len(per_node)
    aux.per_node_min, aux.per_node_max = min(per_node.values(), default=0), max(per_node.values(), default=0)
    if aux.lost:
        aux.errors |= INCOMPLETE
    first = job.counts(comm, ranks[0][1]) if ranks else {}
    for _, r in ranks:
        if job.counts(comm, r) != first:
            aux.errors |= MISMATCH
        if job.async_errors.get(r, 0) not in (0, 7):
            aux.errors |= ERROR
    return aux


def _status_index(status: int) -> int:
    return status.bit_length() - 1


def _group_key(a: _Aux) -> tuple:
    return len(a.comm.members), a.nodes, _status_index(a.status), a.errors


def render_text(job: RasJob, version: str = DEFAULT_VERSION, verbose: bool = False,
                collection_seconds: float = 0.004) -> str:
    """rasClientRunInit and rasClientRunComms for the job's shape (one GPU per process, every node alike)."""
    with job.lock:
        return _render_text(job, version, verbose, collection_seconds)


def _render_text(job: RasJob, version: str, verbose: bool, collection_seconds: float) -> str:
    out = [f"NCCL version {version} compiled with CUDA {CUDA_VERSION}\n",
           f"CUDA runtime version {CUDA_RUNTIME}, driver version {CUDA_DRIVER}\n\n",
           "Job summary\n===========\n\n",
           "  Nodes  Processes         GPUs  Processes     GPUs\n"
           "(total)   per node  per process    (total)  (total)\n",
           f"{len(job.nodes):7d}  {job.gpus_per_node:9d}  {1:11d}  {len(job.processes):9d}  {len(job.processes):7d}\n",
           "\nCommunicators...", f" ({collection_seconds:.3f}s)\n=============\n\n"]
    auxes = [_aux(job, c) for c in job.comms if any(not job.missing(r) for r in c.members)]
    auxes.sort(key=lambda a: (-len(a.comm.members), -a.nodes, -_status_index(a.status), -a.errors, len(a.ranks)))
    groups: list[list[_Aux]] = []
    for a in auxes:
        if groups and _group_key(groups[-1][0]) == _group_key(a):
            groups[-1].append(a)
        else:
            groups.append([a])
    if auxes:
        out.append("Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
                   "    #  in group  per comm  per node  per comm  in group\n")
    else:
        out.append("No communicator data collected!\n")
    for g, group in enumerate(groups):
        lo, hi = min(a.per_node_min for a in group), max(a.per_node_max for a in group)
        per_node = str(lo) if lo == hi else f"{lo}-{hi}"
        in_group = len({(job.processes[r].host, job.processes[r].port, job.processes[r].nvml_dev)
                        for a in group for _, r in a.ranks})
        first = group[0]
        out.append(f"{g:5d}  {len(group):8d}  {first.nodes:8d}  {per_node:>8s}  {len(first.comm.members):8d}  "
                   f"{in_group:8d}  {STATUS_WORDS[_status_index(first.status)]:>8s}  {ERROR_WORDS[first.errors]:>6s}\n")

    out.append("\nErrors\n======\n\n")
    missing_processes = sorted((job.processes[r] for r in job.unresponsive - job.dead), key=lambda p: (p.host, p.pid))
    if missing_processes:
        n = len(missing_processes)
        out.append(f"INCOMPLETE\n  Missing communicator data from {n} job process{_plural(n, 'es')}\n")
        if _outlier(n, verbose):
            out += [_process_line(p) for p in missing_processes]
        out.append("\n")
    dead = sorted((job.processes[r] for r in job.dead), key=lambda p: (p.host, p.pid))
    if dead:
        n = len(dead)
        out.append(f"DEAD\n  {n} job process{'es are' if n > 1 else ' is'} considered dead (unreachable via the "
                   "RAS network)\n")
        if _outlier(n, verbose):
            out += [_process_line(p) for p in dead]
        out.append("\n")
    for g, group in enumerate(groups):
        for i, a in enumerate(group):
            head = f"#{g}-{i} ({a.comm.hash:016x})"
            if a.errors & INCOMPLETE:
                n = len(a.lost)
                out.append(f"{head} INCOMPLETE\n  Missing communicator data from {n} rank{_plural(n)}\n")
                if _outlier(n, verbose):
                    out += [_rank_tail(job, f"  Rank {cr}", r) for cr, r in a.lost]
                out.append("\n")
            if a.errors & ERROR:
                out.append(f"{head} ERROR\n")
                errors = {}
                for _, r in a.ranks:
                    code = job.async_errors.get(r, 0)
                    errors[code] = errors.get(code, 0) + 1
                n = len(a.ranks) - errors.get(0, 0) - errors.get(7, 0)
                if n > 0:
                    out.append(f"  Asynchronous error{_plural(n)} on {n} rank{_plural(n)}\n")
                    out += _break_down(job, a, errors, verbose)
                out.append("\n")

    out.append("Warnings\n========\n\n")
    timeouts = _timeouts(job)
    if timeouts:
        out.append(f"TIMEOUT\n  Encountered {timeouts} communication timeout{_plural(timeouts)} while gathering "
                   "communicator data\n\n")
    for g, group in enumerate(groups):
        for i, a in enumerate(group):
            if a.errors & MISMATCH:
                out.append(f"#{g}-{i} ({a.comm.hash:016x}) MISMATCH\n")
                out += _count_mismatch(job, a, verbose)
    return "".join(out)


def _process_line(p: SimProcess) -> str:
    return f"  Process {p.pid} on node {p.host} managing GPU {_devs([p.cuda_dev], [p.nvml_dev])}\n"


def _rank_tail(job: RasJob, head: str, rank: int) -> str:
    p = job.processes[rank]
    return f"{head} -- GPU {_gpu(p.cuda_dev, p.nvml_dev)} managed by process {p.pid} on node {p.host}\n"


def _break_down(job: RasJob, a: _Aux, errors: dict[int, int], verbose: bool) -> list[str]:
    """rasClientBreakDownErrors: the most frequent error kind first."""
    out, left = [], dict(errors)
    while True:
        count, code = 0, 0
        for c in range(1, 7):
            if count < left.get(c, 0):
                count, code = left[c], c
        if code == 0:
            return out
        if count > 1:
            out.append(f"  {count} ranks reported {NCCL_ERROR_WORDS[code]}\n")
        if _outlier(count, verbose):
            for cr, r in sorted(a.ranks):
                if job.async_errors.get(r, 0) == code:
                    head = f"  Rank {cr}" if count > 1 else f"  Rank {cr} reported {NCCL_ERROR_WORDS[code]}"
                    out.append(_rank_tail(job, head, r))
        left[code] = 0


def _count_mismatch(job: RasJob, a: _Aux, verbose: bool) -> list[str]:
    out = []
    size = len(a.comm.members)
    first = job.counts(a.comm, a.ranks[0][1])
    for name in COLLECTIVES:
        values = sorted((job.counts(a.comm, r)[name], cr, r) for cr, r in a.ranks)
        if all(v == first[name] for v, _, _ in values):
            continue
        out.append(f"  Communicator ranks have different {name} operation counts\n")
        by_value: dict[int, list[tuple[int, int]]] = {}
        for v, cr, r in values:
            by_value.setdefault(v, []).append((cr, r))
        for value, members in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), -kv[0])):
            count = len(members)
            if count > 1:
                out.append(f"  {count} ranks have launched up to operation {value}\n" if value > 0
                           else f"  {count} ranks have not launched any operations\n")
            if _outlier(count, verbose, size):
                for cr, r in members:
                    if count > 1:
                        head = f"  Rank {cr}"
                    elif value > 0:
                        head = f"  Rank {cr} has launched up to operation {value}"
                    else:
                        head = f"  Rank {cr} has not launched any operations"
                    out.append(_rank_tail(job, head, r))
        out.append("\n")
    return out


# ---------------------------------------------------------------------------------------------- events

def monitor_event(job: RasJob, process: SimProcess, fmt: str) -> str:
    """rasClientsNotifyEvent for PEER_DEAD (a lifecycle event)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    if fmt == "json":
        return ("{\n" f'  "timestamp": "{stamp}",\n' '  "group": "LIFECYCLE",\n' '  "event": "PEER_DEAD",\n'
                '  "peer": {\n' f'    "host": "{process.host}",\n' f'    "pid": {process.pid},\n'
                f'    "cuda_devs": [{process.cuda_dev}],\n' f'    "nvml_devs": [{process.nvml_dev}]\n' "  },\n"
                '  "details": ""\n' "}\n")
    return (f"[{stamp}] PEER_DEAD: Process {process.pid} on node {process.host} managing GPU "
            f"{_devs([process.cuda_dev], [process.nvml_dev])} \n")


# ---------------------------------------------------------------------------------------------- service

class RasService:
    """NCCL's RAS client socket for one node of ``job``, on 127.0.0.1 and a port of its own."""

    def __init__(self, job: RasJob, version: str = DEFAULT_VERSION, host: str = "127.0.0.1", port: int = 0,
                 collection_seconds: float = 0.004) -> None:
        if version_tuple(version) < FIRST_VERSION:
            raise ValueError(f"NCCL {version}: the simulated RAS service speaks 2.26 and later")
        self.job, self.version, self.collection_seconds = job, version, collection_seconds
        self._sock = socket.create_server((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self._stop = threading.Event()
        self._monitors: list[tuple[socket.socket, str]] = []
        self._monitor_lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=f"ras-{self.port}", daemon=True)
        self.statuses = 0      # status answers sent

    @property
    def address(self) -> str:
        """In NCCL_RAS_ADDR form."""
        return f"{self.host}:{self.port}"

    @property
    def monitors(self) -> int:
        """Clients in monitor mode."""
        with self._monitor_lock:
            return len(self._monitors)

    @property
    def json(self) -> bool:
        return version_tuple(self.version) >= FIRST_JSON

    def start(self) -> "RasService":
        self.job.listeners.append(self._peer_dead)
        self._thread.start()
        return self

    def set_job(self, job: RasJob) -> None:
        """Serve another job from now on (the node's next job)."""
        if self._peer_dead in self.job.listeners:
            self.job.listeners.remove(self._peer_dead)
        self.job = job
        job.listeners.append(self._peer_dead)

    def stop(self) -> None:
        self._stop.set()
        if self._peer_dead in self.job.listeners:
            self.job.listeners.remove(self._peer_dead)
        try:
            self._sock.close()
        except OSError:
            pass
        with self._monitor_lock:
            for conn, _ in self._monitors:
                conn.close()
            self._monitors.clear()
        self._thread.join(5)

    def __enter__(self) -> "RasService":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _serve(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        """rasClientEventLoop: newline-terminated commands, answered one by one until STATUS or MONITOR."""
        fmt, buffer, keep = "text", b"", False
        conn.settimeout(30)
        try:
            while not self._stop.is_set():
                data = conn.recv(RECV_BUFFER - len(buffer))
                if not data:
                    return
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    command = line.rstrip(b"\r").decode(errors="replace")
                    reply, fmt, done, keep = self._command(command, fmt)
                    if reply:
                        conn.sendall(reply.encode())
                    if done:
                        return
                if len(buffer) >= RECV_BUFFER:
                    return   # "RAS excessively long input line; terminating the client socket"
        except OSError:
            return
        finally:
            if not keep:
                conn.close()
            else:
                with self._monitor_lock:
                    self._monitors.append((conn, fmt))

    def _command(self, command: str, fmt: str) -> tuple[str, str, bool, bool]:
        """(reply, format, connection done, kept for monitoring)."""
        lower = command.lower()
        if lower.startswith("client protocol "):
            return f"SERVER PROTOCOL {PROTOCOL}\n", fmt, False, False
        if lower.startswith("timeout "):
            value = command[len("timeout "):]
            ok = value.isdigit()
            return ("OK\n" if ok else f"ERROR: Invalid timeout value {value}\n"), fmt, False, False
        if lower.startswith("set format ") and self.json:
            value = command[len("set format "):]
            if value.lower() in ("text", "json"):
                return "OK\n", value.lower(), False, False
            return f"ERROR: Invalid format {value}\n", fmt, False, False
        if lower in ("status", "verbose status"):
            self.statuses += 1
            if fmt == "json":
                return render_json(self.job, self.version, self.collection_seconds), fmt, True, False
            return render_text(self.job, self.version, lower == "verbose status",
                               self.collection_seconds), fmt, True, False
        if (lower == "monitor" or lower.startswith("monitor ")) and version_tuple(self.version) >= FIRST_MONITOR:
            groups = [g for g in lower[len("monitor"):].strip().split(",") if g]
            bad = [g for g in groups if g not in ("lifecycle", "trace", "all")]
            if bad:
                return f"ERROR: Invalid event group '{bad[0]}'\n", fmt, False, False
            return "OK\n", fmt, True, True
        return f"ERROR: Unknown command {command}\n", fmt, False, False

    def _peer_dead(self, process: SimProcess) -> None:
        with self._monitor_lock:
            for conn, fmt in list(self._monitors):
                try:
                    conn.sendall(monitor_event(self.job, process, fmt).encode())
                except OSError:
                    self._monitors.remove((conn, fmt))
                    conn.close()


def node_service(job: RasJob, version: str = DEFAULT_VERSION) -> RasService:
    """The RAS service a node of a simulated run offers (started); the run keeps ``job`` current."""
    return RasService(job, version).start()

