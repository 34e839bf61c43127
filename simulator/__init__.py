"""lockstep simulator."""
