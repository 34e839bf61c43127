"""lockstep analytics, laid out by its data flow, bottom to top; each layer imports only those below it.

- ``prom``: the Prometheus client (authentication, the session, PromQL, answer decoding, one error type);
- ``frame``: a job's window of samples as feature matrices (the inputs' queries, the grid, the features);
- ``scoring``: pure scorers over the features (straggler, stall, loss, imbalance, relative pace, step
  times, evidence); they import neither the service nor the Prometheus client;
- ``service``: the refresh, what it keeps between refreshes, the job views, the HTTP routes and metrics;
- ``evaluation``: the evaluation harness over simulated scenarios and the post-mortem of a past window;
- ``report``: the monthly review, which speaks only to the Prometheus client.
"""
