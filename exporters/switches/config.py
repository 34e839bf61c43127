"""The fabric exporter's one frozen config, built from its flags (``cli.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.fabric.ibdiag import LANE_GBPS


@dataclass(frozen=True)
class FabricConfig:
    ibnetdiscover: tuple[str, ...] = ("ibnetdiscover",)   # the command and any leading arguments (-C mlx5_0)
    perfquery: tuple[str, ...] = ("perfquery",)
    interval_s: float = 60.0          # a sweep starts this often (a slow sweep delays the next, never overlaps)
    discover_timeout_s: float = 60.0  # ibnetdiscover's deadline
    node_timeout_s: float = 5.0       # one perfquery of one switch or HCA (all its ports)
    workers: int = 8                  # perfquery runs at once
    expected_width: int | None = None  # lanes every link should run at (4)
    expected_speed: str | None = None  # speed every link should run at (NDR)
    sweep_hcas: bool = True           # False: perfquery switches only; host links are read at their switch end

    def __post_init__(self) -> None:
        for name in ("interval_s", "discover_timeout_s", "node_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.expected_speed is not None and self.expected_speed not in LANE_GBPS:
            raise ValueError(f"expected speed {self.expected_speed!r} is none of {', '.join(LANE_GBPS)}")
        if not self.ibnetdiscover or not self.perfquery:
            raise ValueError("the ibnetdiscover and perfquery commands must not be empty")

    @property
    def expected_rate_bits_per_second(self) -> float | None:
        if self.expected_width is None or self.expected_speed is None:
            return None
        return self.expected_width * LANE_GBPS[self.expected_speed] * 1e9
