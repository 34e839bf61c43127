"""lockstep exporters: the node agent's collectors and the rack power exporter.

Kept light on purpose: importing ``lockstep.exporters.catalog`` must not pull in pynvml or aiohttp.
"""
