"""A simulated cluster's history as Prometheus TSDB blocks: ``lockstep sim backfill`` (``sim``), the
blocks written through promtool (``blocks``) and the recording rules evaluated over them (``rules``)."""
