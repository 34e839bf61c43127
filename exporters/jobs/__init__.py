"""Which training job holds which GPU, from the scheduler: Slurm's prolog mapping files (``slurm``) or the
kubelet and the API server (``lockstep.exporters.kube``); both give ``JobRow``s the ``jobs`` collector exposes."""
