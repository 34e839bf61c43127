"""Code lockstep did not write: upstream files copied byte for byte, and code generated from them.

Only each package's ``__init__.py`` (which says what the package holds) is written here; nothing else is
edited by hand. Each package's README.md names the upstream source, commit and licence and the command
that regenerates it (``podresources``: the kubelet's PodResources v1 gRPC API, ``make proto``).
"""
