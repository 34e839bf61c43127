"""lockstep dashboards."""
