"""The compute fabric as the node agent sees it: RDMA devices under ``<sysfs>/class/infiniband`` and
driver statistics of the NICs behind them.

Reading is kept apart from parsing (docs/style.md, rule 1): ``sysfs`` holds descriptors open between scrapes,
``topology`` discovers devices, ports, netdevs and PCI chains (``device_scan`` redoes it when they change),
``pci`` parses PCI addresses and chains, ``rails`` infers each device's rail from those chains, ``ib``
parses port attributes and counters, ``ethtool`` / ``ethtool_ioctl`` are the two sources behind the
``Ethtool`` Protocol and ``pfc_table`` maps driver counter names to catalog metrics.
"""
