"""Hang localisation from PyTorch Flight Recorder dumps (``lockstep analytics hang DIR``).

When a synchronous job hangs, the process-group watchdog of every rank writes what its Flight Recorder
holds: the last collectives and point-to-point operations it issued, per process group, with their
sequence numbers, sizes, dtypes and state. This package reads one such dump per rank and says which
collective not every rank joined, which ranks did not (on which node and GPU), and which collective
the ranks called with different operations, sizes or dtypes.

- ``records``: the plain dataclasses a dump decodes into (one rank's process groups and entries).
- ``dump``: reading a directory of dumps and decoding each file, an untrusted input: JSON with size and
  depth bounds, pickle through an unpickler that refuses every global.
- ``placement``: rank → node and GPU, from a ranks file or a node list (the dumps carry neither).
- ``match``: the matching itself, pure code over ``records``.
- ``report``: the JSON shape and the text an on-call engineer reads.
- ``cli``: the subcommand's flags and exit codes.
"""
