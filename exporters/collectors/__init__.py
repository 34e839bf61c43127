"""Built-in collectors of the node agent. Every module here registers itself with
``lockstep.exporters.registry.register``; modules starting with ``_`` are helpers, not collectors."""
