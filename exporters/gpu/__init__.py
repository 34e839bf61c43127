"""GPU access for the node agent: the ``Nvml`` Protocol, its backends (pynvml, DCGM profiling, the
simulator's ``gpus.json``), the one NVML error-handling helper, the XID event thread and the
dcgm-exporter name table. Imported only by ``lockstep.exporters.collectors.gpu``/``jobs``: importing the catalog
must not import pynvml."""
