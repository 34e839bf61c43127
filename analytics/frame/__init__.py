"""A job's window as feature matrices: what the scorers read, one PromQL query per input (``inputs``),
the matrices themselves (``features``), and a job's window held and moved on (``window``). Imports the
Prometheus client's grid and decoded blocks, never its HTTP calls."""
