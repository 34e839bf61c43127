"""Cluster validation runs as data: parsers for the tools' real outputs (nccl-tests, perftest, DCGM
diagnostics, fio, gpu-burn), the results store the node agent's ``validation`` collector reads, the
bounded runner and the ``lockstep validate`` command.

Light on purpose: the node agent imports the store's reader, so nothing here imports more than the
standard library and ``lockstep.exporters.catalog``.
"""
