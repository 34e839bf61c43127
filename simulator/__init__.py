"""lockstep simulator: a synthetic GPU training cluster with fault injection and ground truth.

One pure model, two writers. ``scenario`` loads the YAML; ``topology`` names nodes, racks, rails;
``faults`` and ``job`` turn the scenario into per-interval effects and the job's step dynamics;
``observe`` and ``model`` produce the seeded, integer-counter ``State`` at every tick. ``signals``
is the one table from that state to file fields and catalog metrics (with unit conversions and
labels). ``live`` (with ``tree/`` and ``redfish``) writes it as sysfs/procfs/ethtool/gpus.json
trees, at the paths of ``lockstep.exporters.catalog.simlayout``, and serves it over Redfish; ``series``
(with ``blocks`` and ``truth``) writes it as a long Parquet frame plus ground truth. Formats:
simulator/FORMATS.md.
"""
