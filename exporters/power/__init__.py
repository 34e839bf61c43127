"""``lockstep power-exporter``: rack power and cooling from Redfish BMCs, PDUs and CDUs and IPMI DCMI.

config (YAML contract) -> poller (bounded concurrency, per-target deadline) -> walks per kind
(bmc, pdu, cdu: pure ``parse_*`` over Redfish documents; ipmi: DCMI text) -> app (/metrics, /probe).
"""
