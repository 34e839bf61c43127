"""The storage exporter (``lockstep storage-exporter``): cluster-wide storage systems polled over their own
interfaces, mapped to the common metrics of ``exporters/catalog/storagesys.py``."""
