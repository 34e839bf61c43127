"""The switch exporter (``lockstep switch-exporter``): per-port, per-priority PFC, ECN, queue and PFC-watchdog
counters of Ethernet switches, subscribed over gNMI (SONiC and NVIDIA Cumulus path sets)."""
