"""The scorers: pure functions over a job's feature matrices (``lockstep.analytics.frame.features``).
Straggler (``straggler``, ``relative``, ``detections``, ``evidence``), stall (``stall``), imbalance
(``imbalance``), the loss account (``loss``), one scoring pass per job (``score``) and per-rank step
times (``steptimes``). They import neither the service nor the Prometheus client."""
