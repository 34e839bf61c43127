"""The shipped scenarios as exact copies: tests of the simulator's own physics (a throttled GPU's clock,
the loss of a fault-free run, the exact truth of the contract example) run them with ``noise: none``,
the simulator's identical ranks; the shipped files carry realistic noise (simulator/FORMATS.md)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from lockstep.simulator.noise import NONE
from lockstep.simulator.scenario import Scenario, load_scenario
from tests.helpers.paths import REPO

SHIPPED = REPO / "simulator" / "scenarios"


def exact_file(name: str, directory: Path) -> Path:
    """``simulator/scenarios/<name>.yaml`` with ``noise: none``, written under ``directory``."""
    path = directory / f"{name}.exact.yaml"
    path.write_text((SHIPPED / f"{name}.yaml").read_text() + "\nnoise: none\n")
    return path


def exact(name: str) -> Scenario:
    return dataclasses.replace(load_scenario(SHIPPED / f"{name}.yaml"), noise=NONE)
