"""The simulated ranks' step ends, sent through the step feed (``lockstep.exporters.catalog.stepfeed``) to each
node's ``DIR/<node>/steps.sock``, where a node agent with ``--collector.steps`` and ``--sim.node-root`` listens.

Every job rank is one process (pid and session fixed per rank) that reports once per tick, as
``lockstep.training.step_end()`` would after the interval's steps: the job's step count, the time its last step
ended and the time between its step ends. A synchronous job's ranks end each step together, so they report one
pace; a hang stops every rank's count; a rank whose GPU is lost stops reporting (its process died). Nothing
listening (no agent yet, or none at all) is what it is for a real job: the report is dropped and the next one
carries the totals.
"""
from __future__ import annotations

import math
import os
import socket

import numpy as np

from lockstep.exporters.catalog import stepfeed
from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology

FIRST_PID = 40000


class StepSender:
    def __init__(self, topo: Topology, nodes: list[SimNode], job_id: str) -> None:
        self.topo, self.nodes, self.job_id = topo, nodes, job_id
        self.gpus = np.flatnonzero(topo.job_gpus)
        self.sock: socket.socket | None = None      # opened at the first node with an agent listening
        self.prev_steps: float | None = None
        self.last_end: float | None = None
        self.seconds = 0.0
        self.sent = self.dropped = 0

    def send(self, s: State) -> None:
        if not self._advance(s):
            return
        listening = {}
        for pos, g in enumerate(self.gpus):
            g = int(g)
            node, gpu = self.nodes[int(self.topo.gpu_node[g])], int(self.topo.gpu_index[g])
            if node.name not in listening:       # one look per node: most simulated nodes have no agent
                listening[node.name] = os.path.exists(node.steps_socket)
            if s.lost[g] or s.missing[g] or not listening[node.name]:
                continue
            report = stepfeed.Report(
                stepfeed.Identity(self.job_id, str(pos), str(gpu), str(self.topo.identity["uuid"][g])),
                FIRST_PID + pos, f"sim{self.topo.scenario.seed:x}r{pos}", int(s.steps), int(s.steps) - 1,
                self.last_end, self.seconds)
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self.sock.setblocking(False)
            try:
                self.sock.sendto(stepfeed.encode(report), str(node.steps_socket))
                self.sent += 1
            except OSError:     # no agent listening, or its buffer full
                self.dropped += 1

    def _advance(self, s: State) -> bool:
        """Moves the job's last step end to this tick; False before the first step ended."""
        whole = math.floor(s.steps)
        if self.prev_steps is not None and whole > math.floor(self.prev_steps):
            per_step = self.topo.scenario.sample_period_s / max(s.steps - self.prev_steps, 1e-9)
            end = s.timestamp - (s.steps - whole) * per_step
            if self.last_end is not None:
                self.seconds += end - self.last_end
            self.last_end = end
        self.prev_steps = s.steps
        return self.last_end is not None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
