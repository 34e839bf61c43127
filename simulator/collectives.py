"""The job's collectives as NCCL's RAS counts them, from the model: what each node's RAS service answers.

World rank ``r`` is the job's ``r``-th GPU (its nodes in cluster order, then GPUs): the ranks of ``blocks``'
``lockstep_rank_step_seconds``. The communicators are ``ncclras.RasJob``'s (a world communicator and one per
node), their counts growing with the steps each rank has entered:

- a running rank has entered the collectives of the step in progress, ``floor(steps) + 1``; under realistic
  noise a rank is a fraction of a step early (a static offset below ``AHEAD``), so an answer taken while the
  job runs finds some ranks one step ahead; while the job stands still every rank has entered as many;
- each wait inside a collective (a hang, a lost member, a hung rank) adds one step the job's compute does not
  count: the waiting ranks entered the collective; a rank that stopped (``rank_stopped``) stays one behind
  until its fault ends;
- a rank whose process is gone (``rank_died``, ``peer_dead``, a lost member's) answers nothing: RAS lists it
  missing, unresponsive until ``RAS_PEER_DEAD_TIMEOUT_S``, then dead (``peer_dead``: dead at once). A node's
  RAS answers while a process of the job lives there.

Each node's agent polls RAS every ``RAS_POLL_S`` at a phase of its own (under realistic noise), so the series
shows at tick ``t`` the answer of its last poll, the job's steps interpolated between the ticks around it;
the live run serves the current tick (its agents poll when they poll).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from lockstep.simulator import hardware as hw
from lockstep.simulator.faults import blocked_at
from lockstep.simulator.ncclras import RasJob
from lockstep.simulator.scenario import RANK_HANG_KINDS
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology

UNRESPONSIVE, DEAD = 1, 2
REASONS = {UNRESPONSIVE: "unresponsive", DEAD: "dead"}
AHEAD = 0.25            # under realistic noise: how early in a step a rank may enter the next one's collective
WAITS = ("hang", "member_lost", *RANK_HANG_KINDS)   # faults that leave the ranks waiting inside a collective


@dataclass(frozen=True)
class Status:
    """The job's ranks as RAS sees them at one moment."""

    stopped: np.ndarray       # per rank: stopped entering collectives (rank_stopped)
    missing: np.ndarray       # per rank: 0, UNRESPONSIVE or DEAD
    answering: np.ndarray     # per job node: its RAS service answers (a process of the job lives there)
    waits: int                # waits inside a collective begun so far (each one step the compute does not count)
    blocked: bool             # the job stands still


@dataclass(frozen=True)
class Answer:
    """One node's RAS answer: when it was taken and what it says (``entered``: NaN for a missing rank)."""

    at: float
    status: Status
    entered: np.ndarray
    _furthest: dict = field(default_factory=dict, compare=False, repr=False)

    def furthest(self, comm: int, members: np.ndarray) -> float:
        """The most steps any of ``members`` (communicator ``comm``'s ranks) has entered, taken once per answer:
        every rank row of a node reads its communicator's (a world communicator of 65,536 ranks, once per row,
        made the series quadratic in the job's size)."""
        found = self._furthest.get(comm)
        if found is None:
            found = self._furthest[comm] = float(np.nanmax(self.entered[members]))
        return found


class RankModel:
    """The job's ranks over time, for one topology."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.g = topo.gpus_per_node
        self.nodes = np.flatnonzero(topo.job_nodes)           # cluster index of each job node
        self.n = len(self.nodes) * self.g
        noisy = topo.scenario.noise.on
        rng = np.random.default_rng([topo.scenario.seed, 0x4A5])
        self.early = rng.uniform(0, AHEAD, self.n) if noisy else np.zeros(self.n)
        self.phase = rng.uniform(0, hw.RAS_POLL_S, len(self.nodes)) if noisy else np.zeros(len(self.nodes))
        self._answers: tuple[int, list[Answer | None]] = (-1, [])

    @cached_property
    def job(self) -> RasJob:
        """The job as RAS serves it: its nodes by address, communicators and processes."""
        return RasJob([self.topo.address(int(i)) for i in self.nodes], self.g, seed=self.topo.scenario.seed)

    def rank_of(self, node: str, gpu: int) -> int:
        return int(np.flatnonzero(self.nodes == self.topo.nodes.index(node))[0]) * self.g + gpu

    def status(self, t: float) -> Status:
        stopped, missing = np.zeros(self.n, bool), np.zeros(self.n, np.int8)
        waits = 0
        for f in self.topo.scenario.faults:
            on_job = f.node is None or self.topo.job_nodes[self.topo.nodes.index(f.node)]
            if f.kind not in WAITS or not on_job or t < f.start_s:
                continue
            waits += 1
            if t >= f.end_s or f.kind == "hang":
                continue
            late = t - f.start_s >= hw.RAS_PEER_DEAD_TIMEOUT_S
            if f.kind == "member_lost":
                first = self.rank_of(f.node, 0)
                gone = missing[first:first + self.g]
                gone[:] = np.maximum(gone, DEAD if late else UNRESPONSIVE)
            elif f.kind == "rank_stopped":
                stopped[self.rank_of(f.node, f.gpu)] = True
            else:
                r = self.rank_of(f.node, f.gpu)
                missing[r] = max(missing[r], DEAD if late or f.kind == "peer_dead" else UNRESPONSIVE)
        answering = ~(missing.reshape(len(self.nodes), self.g) > 0).all(axis=1)
        return Status(stopped, missing, answering, waits, blocked_at(self.topo, t))

    def entered(self, steps: float, s: Status) -> np.ndarray:
        """Steps whose collectives each rank has entered (NaN: RAS has nothing of it)."""
        early = np.full(self.n, self.early.max(initial=0.0)) if s.blocked else self.early
        out = np.floor(steps + early) + 1.0 + s.waits - s.stopped
        return np.where(s.missing > 0, np.nan, out)

    def now(self, state: State) -> Answer:
        """The ranks at the state's own time (the live run)."""
        s = self.status(state.t)
        return Answer(state.t, s, self.entered(state.steps, s))

    def answers(self, state: State) -> list[Answer | None]:
        """Per job node, the answer its agent's last poll got by the state's time (None: no poll yet); the
        same list for every call at one tick."""
        if self._answers[0] != state.k:
            self._answers = (state.k, self._answers_at(state))
        return self._answers[1]

    def _answers_at(self, state: State) -> list[Answer | None]:
        """A node that has not polled again since the last tick keeps its answer (its poll's time and the
        ticks around it are the same)."""
        last = self._answers[1]
        out: list[Answer | None] = []
        for j, phase in enumerate(self.phase):
            polls = math.floor((state.t - phase) / hw.RAS_POLL_S)
            if polls < 0:
                out.append(None)
                continue
            at = phase + polls * hw.RAS_POLL_S
            if j < len(last) and last[j] is not None and last[j].at == at:
                out.append(last[j])
                continue
            s = self.status(at)
            out.append(Answer(at, s, self.entered(steps_at(state.step_history, at), s)))
        return out


def steps_at(history: list[tuple[float, float]], t: float) -> float:
    """The job's steps at ``t``, interpolated between the ticks around it (the oldest kept before them)."""
    if not history:
        return 0.0
    times = np.array([h[0] for h in history])
    return float(np.interp(t, times, np.array([h[1] for h in history])))
