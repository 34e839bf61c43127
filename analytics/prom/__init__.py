"""The Prometheus client: authentication (``auth``), the one aiohttp session every command opens
(``session``), PromQL building (``promql``), the HTTP API calls (``api``), the answer envelope
(``envelope``), a query's grid of sample times (``grid``), answers decoded into arrays (``decode``) and
one error type (``errors``). Imports the catalog and the toolkit only."""
