"""Writers of the per-node source trees (sysfs, procfs, ethtool, gpus.json) that the real
exporters read; see simulator/FORMATS.md."""
