"""The small toolkit every lockstep service shares: YAML config files with located errors
(``configfile``), listen addresses (``listen``), logging (``logs``), the exporter-toolkit web config
and HTTP serving (``webconfig``, ``web``, ``basicauth``), bounded JSON (``jsonload``), the exposition
encoder and its samples (``exposition``, ``sample``), the one ``/metrics`` response (``httpmetrics``),
``--help`` formatting (``helpformat``), moments and durations on a command line (``timeparse``) and
the version (``version``). Imports only the catalog."""
