"""One GPU held by one job: a row of ``lockstep_gpu_job_info``, whichever scheduler said so."""
from __future__ import annotations

from dataclasses import dataclass

SLURM, KUBERNETES = "slurm", "kubernetes"


@dataclass(frozen=True, slots=True)
class JobRow:
    gpu: str              # the collector's gpu label (index), "" where unknown
    uuid: str             # GPU-... or MIG-..., "" where unknown
    job_id: str
    user: str = ""        # Slurm's job owner
    rank: str = ""        # the replica or completion index (Kubernetes operators)
    pod: str = ""
    namespace: str = ""
    container: str = ""

    def labels(self, scheduler: str) -> tuple[str, ...]:
        """The label values of ``lockstep_gpu_job_info``, in its catalog order."""
        return (self.gpu, self.uuid, self.job_id, self.user, self.rank, self.pod, self.namespace, self.container,
                scheduler)
