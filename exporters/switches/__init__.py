"""``lockstep fabric-exporter``: an InfiniBand subnet's switch and HCA ports read from a management
host with infiniband-diags (``ibnetdiscover``, ``perfquery``), swept in the background."""
