"""lockstep alerts."""
